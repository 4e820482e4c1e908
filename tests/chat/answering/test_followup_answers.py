"""Follow-up questions answered end to end: through the pipeline, over HTTP (SSE) and over the
WebSocket. Real PostgreSQL, the real embedding model, the real transports."""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from chat.models import Message
from tests.support.answers import assert_answer_is_grounded, collect
from tests.support.clients import fragments_until_idle, send_payload, socket_for
from tests.support.knowledge_base import CAREER_TEXT, EXPENSES_TEXTS, document_create

pytestmark = pytest.mark.django_db(transaction=True)

TRAVEL_TEXTS = [
    "The nightly hotel cap is 180 euros in Lisbon and 240 euros in London. "
    "Hotels above the cap need the approval of a director. "
    "Book hotels through the travel desk at least two weeks ahead.",
    "Trains are the preferred way to travel between cities less than five hours apart. "
    "First class is allowed only for journeys longer than three hours.",
]
LISBON = "What is the nightly hotel cap in Lisbon?"
LONDON = "And in London?"
LONDON_IN_CONTEXT = "What is the nightly hotel cap in? And in London?"  # what London is searched as
MEALS = "What is the daily meal allowance while travelling?"
OFF_TOPIC = "What is the boiling point of liquid nitrogen on Neptune's moons?"


@pytest.fixture
def travel_kb(db):
    return {
        "travel": document_create(title="Travel policy", texts=TRAVEL_TEXTS, pages=[2, 3]),
        "expenses": document_create(title="Expenses policy", texts=EXPENSES_TEXTS),
    }


def answer_of(events) -> tuple[str, list[dict]]:
    content = "".join(e.data["text"] for e in events if e.type == "answer_delta")
    sources = [e.data["citations"] for e in events if e.type == "sources"]
    return content, (sources[0] if sources else [])


def stored_answer(question_id) -> Message:
    return Message.objects.get(reply_to_id=question_id, role=Message.Role.ASSISTANT)


# --- The pipeline --------------------------------------------------------------------------------
async def test_follow_up_is_answered_with_the_london_figure_and_a_citation(travel_kb, staff_user):
    conversation_id = uuid.uuid4()
    first = await collect(user=staff_user, question=LISBON, conversation_id=conversation_id)
    assert "180 euros" in answer_of(first)[0]

    question_id = uuid.uuid4()
    events = await collect(
        user=staff_user, question=LONDON, conversation_id=conversation_id, message_id=question_id
    )

    content, citations = answer_of(events)
    assert "240 euros in London" in content
    assert_answer_is_grounded(content, citations)
    assert citations[0]["document_id"] == travel_kb["travel"].pk
    start = next(e for e in events if e.type == "answer_start")
    assert start.data["search_query"] == LONDON_IN_CONTEXT
    answer = await sync_to_async(stored_answer)(question_id)
    assert answer.search_query == LONDON_IN_CONTEXT
    question = await Message.objects.aget(pk=question_id)
    assert question.content == LONDON  # what the user typed is kept


async def test_a_follow_up_searched_in_context_never_embeds_the_question_as_written(
    travel_kb, staff_user, monkeypatch
):
    """Only what is searched is embedded: "And in London?" read in context is embedded as
    LONDON_IN_CONTEXT; the words as typed would be thrown away (a model call each)."""
    from knowledge import embedding

    embedded: list[str] = []
    real = embedding.embed_query

    def recording(text: str, **options):
        embedded.append(text)
        return real(text, **options)

    monkeypatch.setattr(embedding, "embed_query", recording)
    conversation_id = uuid.uuid4()
    await collect(user=staff_user, question=LISBON, conversation_id=conversation_id)
    assert embedded == [LISBON]
    events = await collect(user=staff_user, question=LONDON, conversation_id=conversation_id)

    assert "240 euros in London" in answer_of(events)[0]
    assert embedded == [LISBON, LONDON_IN_CONTEXT]


async def test_self_contained_question_after_a_follow_up_is_answered_on_its_own(
    travel_kb, staff_user
):
    conversation_id = uuid.uuid4()
    for question in (LISBON, LONDON):
        await collect(user=staff_user, question=question, conversation_id=conversation_id)

    question_id = uuid.uuid4()
    events = await collect(
        user=staff_user, question=MEALS, conversation_id=conversation_id, message_id=question_id
    )

    content, citations = answer_of(events)
    assert "45 euros" in content and "hotel cap" not in content
    assert {c["document_id"] for c in citations} == {travel_kb["expenses"].pk}
    answer = await sync_to_async(stored_answer)(question_id)
    assert answer.search_query == MEALS


async def test_a_follow_up_goes_on_from_where_the_previous_answer_was(db, staff_user):
    """ "What happened after?" is answered first by a sentence that comes after what the
    previous answer gave (chat/answering/extractive.py `follows_said`), not by it again."""
    await sync_to_async(document_create)(title="Carter", texts=[CAREER_TEXT])
    conversation_id = uuid.uuid4()
    first = await collect(
        user=staff_user, question="What did Carter do in 1990?", conversation_id=conversation_id
    )
    first_sentence = answer_of(first)[0].split(" [1]")[0]
    assert first_sentence == "In 1990 Carter joined the band Slowdive as its drummer."

    events = await collect(
        user=staff_user, question="What did he do after that?", conversation_id=conversation_id
    )

    content, citations = answer_of(events)
    assert "Two years later Carter left to record a solo album" in content
    assert_answer_is_grounded(content, citations)


async def test_follow_up_after_a_refused_question_is_answered_as_written(travel_kb, staff_user):
    conversation_id = uuid.uuid4()
    refused = await collect(user=staff_user, question=OFF_TOPIC, conversation_id=conversation_id)
    assert refused[-1].type == "refusal"

    events = await collect(
        user=staff_user,
        question="And what is the nightly hotel cap in London?",
        conversation_id=conversation_id,
    )

    content, citations = answer_of(events)
    assert "240 euros in London" in content
    assert_answer_is_grounded(content, citations)


async def test_follow_up_that_nothing_supports_is_refused_with_the_query_it_used(
    travel_kb, staff_user
):
    conversation_id = uuid.uuid4()
    await collect(user=staff_user, question=OFF_TOPIC, conversation_id=conversation_id)

    events = await collect(
        user=staff_user, question="And on Titan?", conversation_id=conversation_id
    )

    assert [e.type for e in events] == ["refusal"]
    assert "Titan" in events[0].data["search_query"]
    assert "nitrogen" in events[0].data["search_query"]


async def test_the_first_question_of_a_conversation_has_no_context(travel_kb, staff_user):
    """A follow-up's context is its own conversation's: another conversation about Lisbon,
    however recent, lends it nothing."""
    await collect(user=staff_user, question=LISBON, conversation_id=uuid.uuid4())

    events = await collect(user=staff_user, question=LONDON, conversation_id=uuid.uuid4())

    searched = next(e for e in events if e.type in ("answer_start", "refusal"))
    assert searched.data["search_query"] == LONDON


async def test_another_users_shared_conversation_lends_its_context_to_nobody(
    travel_kb, staff_user, other_staff_user
):
    """Only the owner posts to a conversation, so another user's follow-up can never be read in
    its context: posting there is forbidden and stores nothing, and the user's own new
    conversation is searched with its own (empty) context only."""
    from chat.errors import AnswerError

    shared_id = uuid.uuid4()
    await collect(user=staff_user, question=LISBON, conversation_id=shared_id)

    with pytest.raises(AnswerError) as raised:
        await collect(user=other_staff_user, question=LONDON, conversation_id=shared_id)
    assert raised.value.status == 403
    assert await Message.objects.filter(conversation_id=shared_id).acount() == 2

    own = await collect(user=other_staff_user, question=LONDON, conversation_id=uuid.uuid4())
    searched = next(e for e in own if e.type in ("answer_start", "refusal"))
    assert searched.data["search_query"] == LONDON


async def test_the_query_used_is_logged_with_the_exchange(travel_kb, staff_user, caplog, settings):
    settings.CHAT_LOG_QUERIES = True
    conversation_id = uuid.uuid4()
    await collect(user=staff_user, question=LISBON, conversation_id=conversation_id)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="sourced.exchange"):
        await collect(user=staff_user, question=LONDON, conversation_id=conversation_id)

    lines = [json.loads(r.message) for r in caplog.records if r.name == "sourced.exchange"]
    assert len(lines) == 1
    assert lines[0]["search_query"] == LONDON_IN_CONTEXT and lines[0]["contextual"]


async def test_regenerating_a_follow_up_reads_it_in_the_same_context(travel_kb, staff_user):
    from chat.answering.pipeline import AnswerOptions

    conversation_id = uuid.uuid4()
    await collect(user=staff_user, question=LISBON, conversation_id=conversation_id)
    question_id = uuid.uuid4()
    await collect(
        user=staff_user, question=LONDON, conversation_id=conversation_id, message_id=question_id
    )
    await collect(user=staff_user, question=MEALS, conversation_id=conversation_id)

    events = await collect(
        user=staff_user,
        question=None,
        message_id=question_id,
        options=AnswerOptions(regenerate=True),
    )

    assert "240 euros in London" in answer_of(events)[0]


# --- Over HTTP (the SSE API) and the WebSocket ---------------------------------------------------
async def sse_chat(client: AsyncClient, **payload) -> list[tuple[str, dict]]:
    response = await client.post("/api/chat", payload, "application/json")
    assert response.status_code == 200, response.content
    body = b"".join([part async for part in response.streaming_content]).decode()
    events = []
    for frame in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
        events.append((lines["event"], json.loads(lines["data"])))
    return events


async def test_follow_up_over_http(travel_kb, staff_user):
    client = AsyncClient()
    await sync_to_async(client.force_login)(staff_user)
    conversation_id = str(uuid.uuid4())
    first = await sse_chat(
        client, message=LISBON, message_id=str(uuid.uuid4()), conversation_id=conversation_id
    )
    assert first[0][0] == "answer_start"

    events = await sse_chat(
        client, message=LONDON, message_id=str(uuid.uuid4()), conversation_id=conversation_id
    )

    names = [name for name, _ in events]
    assert names[0] == "answer_start" and names[-2:] == ["sources", "answer_end"]
    assert events[0][1]["search_query"] == LONDON_IN_CONTEXT
    content = "".join(data["text"] for name, data in events if name == "answer_delta")
    assert "240 euros in London" in content
    assert_answer_is_grounded(content, events[-2][1]["citations"])

    meals = await sse_chat(
        client, message=MEALS, message_id=str(uuid.uuid4()), conversation_id=conversation_id
    )
    assert meals[0][1]["search_query"] == MEALS
    assert "45 euros" in "".join(d["text"] for n, d in meals if n == "answer_delta")


async def test_follow_up_over_the_websocket(travel_kb, staff_user):
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    try:
        await communicator.send_to(text_data=send_payload(LISBON))
        await fragments_until_idle(communicator)
        await communicator.send_to(text_data=send_payload(LONDON))
        fragments = await fragments_until_idle(communicator)
    finally:
        await communicator.disconnect()

    answers = [
        m
        async for m in Message.objects.filter(
            conversation_id=conversation_id, role="assistant"
        ).order_by("created_at")
    ]
    assert len(answers) == 2 and answers[1].status == Message.Status.COMPLETE
    assert "240 euros in London" in answers[1].content
    assert answers[1].search_query == LONDON_IN_CONTEXT
    assert "240 euros in London" in "".join(fragments)
    assert await answers[1].citations.acount() >= 1
