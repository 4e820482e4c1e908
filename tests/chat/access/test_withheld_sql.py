"""`messages_withheld` for a reader of some collections decides in one hand-written statement
(chat/withheld_sql.py): the reason for each case, a citation whose document nobody knows any
more included, and the same answers by conversation as by message ids."""

from __future__ import annotations

import pytest

from chat.models import Citation, Conversation, DocumentGiven, Message
from chat.withheld import Withheld, messages_withheld
from knowledge.access import reader_for
from knowledge.models import Collection, Document
from tests.support.knowledge_base import document_create
from tests.support.readers import readers_create

pytestmark = pytest.mark.django_db


def _answer(conversation: Conversation, *, given=(), cites=(), unknown_citation=False) -> Message:
    question = Message.objects.create(conversation=conversation, role="user", content="?")
    answer = Message.objects.create(
        conversation=conversation, role="assistant", reply_to=question, content="Text.",
        status=Message.Status.COMPLETE,
    )  # fmt: skip
    for document_id in given:
        DocumentGiven.objects.create(message=answer, document_id=document_id)
    for n, document in enumerate(cites, start=1):
        Citation.objects.create(
            message=answer, n=n, similarity=0.8, document_id_snapshot=document.pk,
            document_title=document.title, text="t", text_hash="h",
        )  # fmt: skip
    if unknown_citation:  # stored before snapshots, its chunk gone: no document known
        Citation.objects.create(
            message=answer, n=9, similarity=0.8, document_title="?", text="t", text_hash="h"
        )
    return answer


def test_each_reason_and_the_unknown_document():
    readers = readers_create(with_outsiders=False)
    asker = readers["asker"]
    hr_only = Collection.objects.create(name="HR only", all_staff=False)
    hr_only.reader_groups.add(readers["hr"])
    general = document_create(title="Handbook", texts=["Leave is 25 days."])
    secret = document_create(title="Pay bands", texts=["Grade 7."], collection=hr_only)
    disabled = document_create(title="Old policy", texts=["Gone."])
    Document.objects.filter(pk=disabled.pk).update(enabled=False)
    deleted = document_create(title="Deleted", texts=["Gone."])
    deleted_id = deleted.pk
    deleted.delete()
    conversation = Conversation.objects.create(owner=asker, title="t", is_private=False)

    readable = _answer(conversation, given=[general.pk], cites=[general])
    restricted = _answer(conversation, given=[general.pk, secret.pk], cites=[general])
    withdrawn = _answer(conversation, given=[disabled.pk])
    gone = _answer(conversation, given=[deleted_id])
    unknown = _answer(conversation, cites=[general], unknown_citation=True)
    both = _answer(conversation, given=[disabled.pk, secret.pk])
    ids = [readable.pk, restricted.pk, withdrawn.pk, gone.pk, unknown.pk, both.pk]

    staff = readers["staff"]  # General only, does not manage documents
    expected = {
        restricted.pk: Withheld.ACCESS,
        withdrawn.pk: Withheld.WITHDRAWN,
        gone.pk: Withheld.WITHDRAWN,
        unknown.pk: Withheld.WITHDRAWN,
        both.pk: Withheld.ACCESS,
    }
    assert messages_withheld(user=staff, message_ids=ids) == expected
    assert messages_withheld(user=reader_for(staff), conversation_id=conversation.pk) == expected
    assert messages_withheld(user=staff, message_ids=[readable.pk, withdrawn.pk]) == {
        withdrawn.pk: Withheld.WITHDRAWN
    }
    assert messages_withheld(user=staff, message_ids=[]) == {}
    # The HR asker reads the restricted collection: only what is withdrawn or unknown.
    assert messages_withheld(user=asker, message_ids=ids) == {
        withdrawn.pk: Withheld.WITHDRAWN,
        gone.pk: Withheld.WITHDRAWN,
        unknown.pk: Withheld.WITHDRAWN,
        both.pk: Withheld.WITHDRAWN,
    }
    # A document manager of General reads its withdrawn documents too.
    assert messages_withheld(user=readers["document manager"], message_ids=ids) == {
        restricted.pk: Withheld.ACCESS,
        gone.pk: Withheld.WITHDRAWN,
        unknown.pk: Withheld.WITHDRAWN,
        both.pk: Withheld.ACCESS,
    }
