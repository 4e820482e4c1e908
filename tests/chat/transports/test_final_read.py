"""The socket's final render reads its answer in one statement (`chat.transcript.answer_row_read`):
the row, its citations in order with their stale check, and the reader's own rating; the same
row the conversation's transcript gives. An answer the socket has just streamed whole is
rendered from its row as stored (`chat.transcript.finished_answer_row`): the same row."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat import services
from chat.models import Conversation, Feedback, Message
from chat.transcript import answer_row_read, conversation_transcript, finished_answer_row
from knowledge.access import reader_for
from knowledge.models import Chunk
from knowledge.retrieval import chunks_search
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


def test_an_answer_just_finished_is_the_row_its_final_render_would_read(staff_user):
    """`finished_answer_row`: the row of an answer as `services.answer_finish` stored it, made
    without reading it back (chat/socket_render.py `finished_html`), is the row read back,
    equal and with the same hash (rows key rendered fragments); a chunk deleted while the
    answer was written is cited stale in both."""
    handbook = document_create(title="Staff handbook", texts=LEAVE_TEXTS)
    reader = reader_for(staff_user)
    found = chunks_search(query="How many days of annual leave?", reader=reader, top_k=3).chunks
    assert len(found) >= 2
    claim = services.exchange_begin(
        user=staff_user,
        message_id=uuid.uuid4(),
        question="How many days of annual leave?",
        conversation_id=None,
        is_private=False,
        mode=Message.Mode.EXTRACTIVE,
        top_k=3,
    )
    Chunk.objects.filter(pk=found[1].chunk_id).delete()
    citations = services.answer_finish(
        answer_id=claim.answer.pk,
        status=Message.Status.COMPLETE,
        content="25 days [1]. Carried over [2].",
        cited=[(2, found[1]), (1, found[0])],
        warning="Your question is longer than the search model can read.",
        search_query="annual leave days",
        searched_document=(handbook.pk, handbook.title),
        searched_documents=[{"id": handbook.pk, "title": handbook.title}],
        evidence=Message.Evidence.WEAK,
        answer=claim.answer,
    )
    assert citations is not None

    row = finished_answer_row(claim.answer, citations)
    read, rating = answer_row_read(
        claim.answer.pk, conversation_id=claim.conversation.pk, rater=staff_user
    )
    assert row == read and hash(row) == hash(read) and rating is None
    assert [(c.n, c.stale) for c in row.citations] == [(1, False), (2, True)]
    assert (row.status, row.evidence, row.searched_documents) == (
        "complete",
        "weak",
        ((handbook.pk, "Staff handbook"),),
    )
