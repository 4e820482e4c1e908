"""Regenerate and retry replace an answer without losing the feedback given on it: an answer
someone rated is kept as a superseded message (docs/decisions/0092-superseded-answers.md), out
of the conversation everywhere its readers look (page, API, history search, replay, what a
follow-up remembers) but still in the admin's feedback review, with its text and citations,
and still under the read rule there."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from chat.errors import AnswerError
from chat.models import Citation, Conversation, Feedback, Message
from chat.selectors import conversation_messages, exchange_stored
from chat.services import exchange_begin, exchange_regenerate, feedback_give
from chat.transcript import conversation_transcript
from chat.turns import conversation_turns_before
from knowledge.collections import collection_create
from knowledge.models import Document
from tests.support.conversations import exchange_create
from tests.support.knowledge_base import document_create
from tests.support.readers import readers_create

pytestmark = pytest.mark.django_db

QUESTION = "How often is the lens wound?"
OLD_ANSWER = "The Tidewater lens is wound every four hours by the Marlinspike crew. [1]"
OLD_WORD = "Marlinspike"  # only in the replaced answer
NEW_ANSWER = "Keepers wind the lens every four hours. [1]"
CHUNK = "Keepers wind the Tidewater lens clockwork every four hours."


@pytest.fixture
def people(db):
    return readers_create(with_outsiders=False)


@pytest.fixture
def rated(people):
    """A shared conversation of the asker whose answer another member of staff rated down."""
    keepers = document_create(title="Keepers", texts=[CHUNK])
    conversation = Conversation.objects.create(owner=people["asker"], title=QUESTION)
    question, answer = exchange_create(
        conversation, question=QUESTION, answer=OLD_ANSWER, cited=list(keepers.chunks.all())
    )
    feedback = Feedback.objects.create(
        user=people["staff"], message=answer, rating=-1, comment="Nobody called Marlinspike."
    )
    return {"conversation": conversation, "question": question, "answer": answer,
            "feedback": feedback}  # fmt: skip


def regenerate(people, rated) -> Message:
    """Regenerate the question's answer and finish the new one."""
    claim = exchange_regenerate(
        user=people["asker"], message_id=rated["question"].pk, mode="extractive", top_k=5
    )
    Message.objects.filter(pk=claim.answer.pk).update(
        content=NEW_ANSWER, status=Message.Status.COMPLETE
    )
    return claim.answer


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_regenerating_keeps_the_rated_answer_and_its_feedback(people, rated):
    new = regenerate(people, rated)

    old = Message.objects.get(pk=rated["answer"].pk)
    assert (old.role, old.content, old.reply_to_id) == (
        Message.Role.SUPERSEDED,
        OLD_ANSWER,
        rated["question"].pk,
    )
    assert Feedback.objects.get(pk=rated["feedback"].pk).message_id == old.pk
    assert Citation.objects.filter(message=old).count() == 1
    assert new.pk != old.pk and new.role == Message.Role.ASSISTANT


def test_an_answer_nobody_rated_is_simply_replaced(people, rated):
    rated["feedback"].delete()

    regenerate(people, rated)

    assert not Message.objects.filter(pk=rated["answer"].pk).exists()


def test_a_retry_after_an_error_keeps_a_rated_answer_too(people, rated):
    Message.objects.filter(pk=rated["answer"].pk).update(status=Message.Status.ERROR)

    claim = exchange_begin(
        user=people["asker"],
        question=QUESTION,
        message_id=rated["question"].pk,
        conversation_id=rated["conversation"].pk,
        is_private=False,
        mode="extractive",
        top_k=5,
    )

    assert claim.answer.pk != rated["answer"].pk
    old = Message.objects.get(pk=rated["answer"].pk)
    assert old.role == Message.Role.SUPERSEDED
    assert Feedback.objects.filter(message=old).count() == 1


def test_the_superseded_answer_is_out_of_the_conversation_everywhere(people, rated):
    new = regenerate(people, rated)
    conversation = rated["conversation"]
    client = client_for(people["staff"])

    assert [m.pk for m in conversation_messages(conversation)] == [rated["question"].pk, new.pk]
    rows = conversation_transcript(conversation, user=people["staff"])
    assert [row.id for row in rows] == [rated["question"].pk, new.pk]
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert NEW_ANSWER.split(" [")[0] in page and OLD_WORD not in page
    api = client.get(f"/api/conversations/{conversation.pk}/messages").content.decode()
    assert str(new.pk) in api and str(rated["answer"].pk) not in api and OLD_WORD not in api
    history = client.get("/history/", {"q": OLD_WORD}).content.decode()
    assert history.count("data-history-item") == 0
    assert (
        client.get("/history/", {"q": "Keepers"}).content.decode().count("data-history-item") == 1
    )
    # Replay and a follow-up's memory read the question's answer: the new one.
    assert (
        exchange_stored(conversation_id=conversation.pk, question_id=rated["question"].pk)[1].pk
        == new.pk
    )
    follow_up = Message.objects.create(conversation=conversation, role="user", content="And?")
    [turn] = conversation_turns_before(follow_up, limit=5)
    assert turn.answer == NEW_ANSWER
    # Nobody rates an answer that is no longer shown.
    with pytest.raises(AnswerError):
        feedback_give(
            user=people["staff"], message=Message.objects.get(pk=rated["answer"].pk), rating=1
        )


def test_the_feedback_review_shows_the_replaced_answer_with_its_text_and_sources(people, rated):
    regenerate(people, rated)
    client = client_for(people["superuser"])

    listing = client.get("/admin/chat/feedback/").content.decode()
    assert "[replaced]" in listing and "Keepers" in listing
    replaced = client.get("/admin/chat/feedback/?answer=replaced").content.decode()
    assert "[replaced]" in replaced
    detail = client.get(f"/admin/chat/feedback/{rated['feedback'].pk}/change/").content.decode()
    assert OLD_WORD in detail and "Keepers" in detail and "no longer shown" in detail
    assert "Nobody called Marlinspike." in detail
    current = client.get("/admin/chat/feedback/?answer=current").content.decode()
    assert "[replaced]" not in current


@pytest.mark.parametrize("role", ["staff", "reader by group"])
def test_the_read_rule_still_applies_to_a_superseded_answer_in_the_admin(people, rated, role):
    hr_only = collection_create(name="HR only", groups=[people["hr"]])
    document_ids = Citation.objects.filter(message=rated["answer"]).values_list(
        "document_id_snapshot", flat=True
    )
    Document.objects.filter(pk__in=list(document_ids)).update(collection=hr_only)
    regenerate(people, rated)
    user = people[role]
    for codename in ("view_feedback", "view_message"):
        user.user_permissions.add(Permission.objects.get(codename=codename))
    client = client_for(user)

    listing = client.get("/admin/chat/feedback/").content.decode()
    detail = client.get(f"/admin/chat/feedback/{rated['feedback'].pk}/change/")
    reads = role == "reader by group"
    assert ("[replaced]" in listing) == reads
    assert (OLD_WORD in detail.content.decode()) == reads
