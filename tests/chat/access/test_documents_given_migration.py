"""The migration that brings the record of what reached each message (chat/0021_documents_given):
messages stored before it get a conservative record (docs/decisions/0130-an-answer-records-
what-it-was-given.md): what they cite, the conversation's attached files, every earlier
answer's record, and the unknown document for a text that may hold a passage it does not cite,
so that such an answer is withheld from everyone but superusers."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from chat.models import DocumentGiven
from chat.withheld import Withheld, messages_withheld
from knowledge.collections import collection_create
from knowledge.models import Collection, Document, collection_personal_id
from tests.support.migrations import migrate, migrate_to_latest

BEFORE = [("chat", "0020_message_columns_default_empty")]
UNKNOWN = DocumentGiven.UNKNOWN_DOCUMENT


@pytest.mark.django_db(transaction=True)
def test_earlier_messages_get_a_conservative_record(latest_schema_after):
    users = get_user_model().objects
    asker = users.create_user(username="asker", is_staff=True)
    staff = users.create_user(username="staff", is_staff=True)
    root = users.create_superuser(username="root", email="", password=None)
    hr_only = collection_create(name="HR only", users=[asker])
    ready = Document.Status.READY
    pay = Document.objects.create(title="Pay", source="pay.md", collection=hr_only, status=ready)
    leave = Document.objects.create(title="Leave", source="leave.md", status=ready)
    offer = Document.objects.create(
        title="offer.pdf",
        source="offer.pdf",
        status=ready,
        owner=asker,
        collection=Collection.objects.get(pk=collection_personal_id()),
    )

    old = migrate(BEFORE)
    try:
        Conversation = old.get_model("chat", "Conversation")
        Message = old.get_model("chat", "Message")
        Citation = old.get_model("chat", "Citation")
        Attachment = old.get_model("chat", "Attachment")
        conversation = Conversation.objects.create(owner_id=asker.pk, title="Pay", is_private=False)
        plain = Conversation.objects.create(owner_id=asker.pk, title="Leave", is_private=False)

        def answer(
            conversation, *, mode="extractive", status="complete", content="Text.", cites=()
        ):
            question = Message.objects.create(conversation=conversation, role="user", content="?")
            message = Message.objects.create(
                conversation=conversation, role="assistant", reply_to=question, mode=mode,
                status=status, content=content,
            )  # fmt: skip
            for n, document in enumerate(cites, start=1):
                Citation.objects.create(
                    message=message, n=n, similarity=0.8, document_id_snapshot=document.pk,
                    document_title=document.title, text="t", text_hash="h",
                )  # fmt: skip
            return message.pk

        cited_pay = answer(conversation, cites=[pay])
        stopped = answer(conversation, status="interrupted", content="The Quetzal band")
        refused = answer(conversation, status="refused", content="I don't have enough…")
        summary = Message.objects.create(
            conversation=conversation, role="system-summary", content="Summary.", mode="generative"
        ).pk
        generative = answer(conversation, mode="generative", cites=[leave])
        Attachment.objects.create(conversation=conversation, document_id=offer.pk)
        alone = answer(plain, cites=[leave])
    finally:
        migrate_to_latest()

    def record(message_id) -> list[int]:
        return sorted(
            DocumentGiven.objects.filter(message_id=message_id).values_list(
                "document_id", flat=True
            )
        )

    assert record(cited_pay) == sorted([pay.pk, offer.pk])
    assert record(stopped) == sorted([UNKNOWN, pay.pk, offer.pk])  # may hold an uncited passage
    assert record(refused) == sorted([UNKNOWN, pay.pk, offer.pk])  # its query: earlier turns
    assert record(summary) == sorted([UNKNOWN, pay.pk, offer.pk])
    assert record(generative) == sorted([UNKNOWN, pay.pk, leave.pk, offer.pk])
    assert record(alone) == [leave.pk]  # an extractive answer is its cited sentences

    ids = [cited_pay, stopped, refused, summary, generative, alone]
    assert messages_withheld(user=staff, message_ids=ids) == {
        cited_pay: Withheld.ACCESS,
        stopped: Withheld.ACCESS,
        refused: Withheld.ACCESS,
        summary: Withheld.ACCESS,
        generative: Withheld.ACCESS,
    }
    # The asker reads pay and their file; the unknown document is read as a deleted one.
    assert messages_withheld(user=asker, message_ids=ids) == {
        stopped: Withheld.WITHDRAWN,
        refused: Withheld.WITHDRAWN,
        summary: Withheld.WITHDRAWN,
        generative: Withheld.WITHDRAWN,
    }
    # A superuser reads every answer but those drawing on someone else's file: all of that
    # conversation's, which had one attached.
    assert set(messages_withheld(user=root, message_ids=ids)) == set(ids) - {alone}
