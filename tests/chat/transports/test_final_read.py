"""The socket's final render reads its answer in one statement (`chat.transcript.answer_row_read`):
the row, its citations in order with their stale check, and the reader's own rating; the same
row the conversation's transcript gives."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.models import Conversation, Feedback
from chat.transcript import answer_row_read, conversation_transcript
from knowledge.models import Chunk
from tests.support.conversations import exchange_create
from tests.support.knowledge_base import LEAVE_TEXTS, document_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def answered(staff_user):
    """An answer citing three chunks, the second now stale (its text rewritten since)."""
    kept = document_create(title="Staff handbook", texts=LEAVE_TEXTS)
    other = document_create(title="Old handbook", texts=["Leave was 20 days in 2019."])
    chunks = [*Chunk.objects.filter(document=kept).order_by("index")]
    cited = [chunks[0], *Chunk.objects.filter(document=other), chunks[1]]
    conversation = Conversation.objects.create(owner=staff_user, title="Leave")
    _, answer = exchange_create(
        conversation, question="How much leave?", answer="25 days [1] [2] [3].", cited=cited
    )
    Chunk.objects.filter(document=other).update(text="Leave is 30 days from 2027.")
    return conversation, answer


def test_the_row_its_citations_and_the_readers_rating_in_one_statement(
    answered, staff_user, other_staff_user
):
    conversation, answer = answered
    Feedback.objects.create(user=staff_user, message=answer, rating=Feedback.Rating.DOWN)
    Feedback.objects.create(user=other_staff_user, message=answer, rating=Feedback.Rating.UP)

    with CaptureQueriesContext(connection) as statements:
        row, rating = answer_row_read(answer.pk, conversation_id=conversation.pk, rater=staff_user)
    assert len(statements) == 1
    assert rating == Feedback.Rating.DOWN
    assert [c.n for c in row.citations] == [1, 2, 3]
    assert [c.stale for c in row.citations] == [False, True, False]
    assert row == next(
        r for r in conversation_transcript(conversation, user=staff_user) if r.id == answer.pk
    )

    assert answer_row_read(answer.pk, conversation_id=conversation.pk, rater=other_staff_user)[
        1
    ] == (Feedback.Rating.UP)
    assert answer_row_read(answer.pk, conversation_id=conversation.pk)[1] is None


def test_an_answer_without_citations_or_rating_and_one_of_another_conversation(
    staff_user,
):
    conversation = Conversation.objects.create(owner=staff_user, title="Nothing cited")
    _, answer = exchange_create(conversation, question="Hello?", answer="No sources.")
    row, rating = answer_row_read(answer.pk, conversation_id=conversation.pk, rater=staff_user)
    assert (row.content, row.citations, rating) == ("No sources.", (), None)

    elsewhere = Conversation.objects.create(owner=staff_user, title="Another")
    assert answer_row_read(answer.pk, conversation_id=elsewhere.pk, rater=staff_user) is None
    assert answer_row_read(uuid.uuid4(), conversation_id=conversation.pk) is None
