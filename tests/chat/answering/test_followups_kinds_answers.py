"""Follow-ups of the kinds real dialogues hold, answered end to end: a reply to the assistant
("yes, I am a veteran") over HTTP (SSE), "anything else?" over the WebSocket, and a follow-up
about something the knowledge base lacks: answered with the weak-evidence notice after an
answered question, refused after a refusal or when it stands on its own. Real PostgreSQL, the
real embedding model, the real transports."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import sync_to_async
from django.test import AsyncClient

from chat.models import Message
from tests.chat.answering.test_followup_answers import answer_of, sse_chat
from tests.support.answers import assert_answer_is_grounded, collect
from tests.support.clients import fragments_until_idle, send_payload, socket_for
from tests.support.knowledge_base import document_create

pytestmark = pytest.mark.django_db(transaction=True)

GYM_TEXTS = [
    "Staff memberships cost 28 a month and public memberships 42 a month. Alumni pay the staff "
    "rate for the first three years after graduating. Military veterans can ask for a reduced "
    "rate; see Veterans.",
    "Veterans of the armed forces pay 20 a month for any membership type. Bring your veteran ID "
    "card or your discharge papers to reception when you join.",
    "You can freeze your membership for one to three months once a year, for example for travel "
    "or injury. A frozen membership costs 5 a month. If you are pregnant or have a medical "
    "certificate, the freeze is free and can last up to six months.",
    "Monthly memberships can be cancelled with one month's notice from the app or at reception. "
    "Annual memberships paid upfront are not refundable.",
]
PRICE = "How much does a membership cost?"
PAUSE = "Can I freeze my membership?"


@pytest.fixture
def gym_kb(db):
    return document_create(title="Recreation centre membership", texts=GYM_TEXTS)


async def test_a_reply_to_the_assistant_is_answered_in_context_over_http(gym_kb, staff_user):
    client = AsyncClient()
    await sync_to_async(client.force_login)(staff_user)
    conversation_id = str(uuid.uuid4())
    first = await sse_chat(
        client, message=PRICE, message_id=str(uuid.uuid4()), conversation_id=conversation_id
    )
    assert first[0][0] == "answer_start"

    events = await sse_chat(
        client,
        message="yes, I am a veteran",
        message_id=str(uuid.uuid4()),
        conversation_id=conversation_id,
    )

    names = [name for name, _ in events]
    assert names[0] == "answer_start" and names[-2:] == ["sources", "answer_end"]
    query = events[0][1]["search_query"]
    assert query == "How much does a membership cost? yes, I am a veteran"
    content = "".join(data["text"] for name, data in events if name == "answer_delta")
    assert "20 a month" in content
    assert_answer_is_grounded(content, events[-2][1]["citations"])


async def test_anything_else_is_answered_from_the_same_subject_over_the_websocket(
    gym_kb, staff_user
):
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    try:
        await communicator.send_to(text_data=send_payload(PAUSE))
        await fragments_until_idle(communicator)
        await communicator.send_to(text_data=send_payload("anything else?"))
        await fragments_until_idle(communicator)
    finally:
        await communicator.disconnect()

    answers = [
        m
        async for m in Message.objects.filter(
            conversation_id=conversation_id, role="assistant"
        ).order_by("created_at")
    ]
    assert len(answers) == 2 and answers[1].status == Message.Status.COMPLETE
    assert answers[1].search_query == PAUSE
    assert "freeze" in answers[1].content
    assert await answers[1].citations.acount() >= 1


async def asked_in_one_conversation(user, *questions: str) -> tuple[uuid.UUID, list[list]]:
    """(the conversation's id, each question's events): the questions asked one after another
    in a new conversation, through the answering pipeline."""
    conversation_id = uuid.uuid4()
    events = [
        await collect(user=user, question=question, conversation_id=conversation_id)
        for question in questions
    ]
    return conversation_id, events


async def test_a_follow_up_about_something_the_knowledge_base_lacks_is_still_refused(
    gym_kb, staff_user
):
    _, (_, events) = await asked_in_one_conversation(
        staff_user, PRICE, "Does it include a sauna and a climbing wall?"
    )

    assert [e.type for e in events] == ["refusal"]
    assert answer_of(events) == ("", [])


async def test_a_reply_naming_what_the_documents_never_mention_gets_the_notice(gym_kb, staff_user):
    """After an answered question, a reply read in context whose own word the documents never
    hold ("diabetes") is answered from what the conversation found, with the weak-evidence
    notice, stored and sent as such (it was refused before:
    docs/decisions/0031-follow-ups-by-kind.md)."""
    conversation_id, (_, events) = await asked_in_one_conversation(
        staff_user, PAUSE, "I have diabetes"
    )

    assert [e.type for e in events][-2:] == ["sources", "answer_end"]
    sources = next(e for e in events if e.type == "sources")
    assert sources.data["evidence"] == "weak" and sources.data["citations"]
    content, _ = answer_of(events)
    assert "freeze" in content
    answer = await Message.objects.aget(
        conversation_id=conversation_id, reply_to__content="I have diabetes"
    )
    assert answer.evidence == Message.Evidence.WEAK and answer.status == Message.Status.COMPLETE


async def test_after_a_refusal_a_follow_up_the_knowledge_base_lacks_is_refused(gym_kb, staff_user):
    _, (first, events) = await asked_in_one_conversation(
        staff_user, "Is there a rooftop pool?", "And does it have a sauna?"
    )

    assert [e.type for e in first] == ["refusal"]
    assert [e.type for e in events] == ["refusal"]


async def test_a_question_of_its_own_is_refused_when_only_the_conversation_answers_it(
    gym_kb, staff_user
):
    """A self-contained question is searched as written first; its reading in context (the
    fallback) finds the conversation's passage, but its own words ("pension") are nowhere in
    the documents: refused, not answered with the previous subject."""
    _, (_, events) = await asked_in_one_conversation(
        staff_user, PAUSE, "What does the company contribute to my pension?"
    )

    assert [e.type for e in events] == ["refusal"]
