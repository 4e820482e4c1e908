"""States a page could stay stuck in: the database failing while a question is admitted or
while its answer's end is rendered (the page is told and its composer freed), and a burst of
Stop frames (bounded: no query per frame). Over a real socket, real database, real model; the
failure is a real `OperationalError` raised where the database call would be."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.db import OperationalError
from django.utils import timezone

import chat.consumers
import chat.services
import chat.socket_render
from chat.models import Conversation, Message
from chat.ratelimit import in_flight_holder
from tests.support.answers import collect
from tests.support.clients import (
    fragments_of_a_question,
    fragments_until_idle,
    send_payload,
    socket_for,
)
from tests.support.knowledge_base import LEAVE_TEXTS, document_create

pytestmark = pytest.mark.django_db(transaction=True)

LEAVE_QUESTION = "How many days of paid annual leave do full-time employees receive?"


@pytest.fixture
def leave_kb(db):
    return document_create(title="Staff handbook", texts=LEAVE_TEXTS)


def _database_gone(*args, **kwargs):
    raise OperationalError("server closed the connection unexpectedly")


def assert_told_and_freed(fragments: list[str]) -> None:
    page = "".join(fragments)
    assert "Something went wrong while answering" in page
    assert 'data-busy="false"' in fragments[-1]


async def test_a_database_failure_while_admitting_is_shown_and_frees_the_composer(
    staff_user, leave_kb, monkeypatch
):
    monkeypatch.setattr(chat.consumers, "chat_admit", _database_gone)
    fragments = await fragments_of_a_question(staff_user, uuid.uuid4(), LEAVE_QUESTION, timeout=10)
    assert_told_and_freed(fragments)


def _read_back(exchange):
    """The final render that reads the answer back (`final_html`), as after a Stop or an
    error: `finished_html` declining."""
    return None


async def test_a_database_failure_rendering_the_end_is_shown_and_frees_the_composer(
    staff_user, leave_kb, monkeypatch
):
    monkeypatch.setattr(chat.consumers, "finished_html", _read_back)
    monkeypatch.setattr(chat.socket_render, "answer_row_read", _database_gone)
    conversation_id = uuid.uuid4()
    assert_told_and_freed(
        await fragments_of_a_question(staff_user, conversation_id, LEAVE_QUESTION)
    )
    # The answer itself was stored: a reload shows it.
    answer = await Message.objects.aget(conversation_id=conversation_id, role="assistant")
    assert answer.status == Message.Status.COMPLETE


async def test_a_failure_rendering_the_end_from_the_stored_row_is_shown_too(
    staff_user, leave_kb, monkeypatch
):
    """The final render of an answer streamed whole reads nothing (`finished_html`); if it
    fails, the page is told and its composer freed as when the read fails."""

    def broken(*args, **kwargs):
        raise ValueError("a template that cannot render")

    monkeypatch.setattr(chat.socket_render, "streamed_answer_view", broken)
    assert_told_and_freed(await fragments_of_a_question(staff_user, uuid.uuid4(), LEAVE_QUESTION))


async def test_the_conversation_is_free_again_after_a_failure_while_answering(
    staff_user, leave_kb, monkeypatch
):
    """The lock taken by the admission is released when rendering the end fails: the next
    question is answered, not refused as "another question is still being answered"."""
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    with monkeypatch.context() as patch:
        patch.setattr(chat.consumers, "finished_html", _read_back)
        patch.setattr(chat.socket_render, "answer_row_read", _database_gone)
        await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
        assert_told_and_freed(await fragments_until_idle(communicator, timeout=30))
    await communicator.send_to(text_data=send_payload("And how many can be carried over?"))
    fragments = await fragments_until_idle(communicator, timeout=30)
    await communicator.disconnect()
    assert "still being answered" not in "".join(fragments)
    assert await Message.objects.filter(conversation_id=conversation_id).acount() == 4


async def test_a_burst_of_stop_frames_costs_one_lookup(staff_user, monkeypatch):
    conversation = await Conversation.objects.acreate(owner=staff_user, title="Leave")
    lookups = []
    real_lookup = chat.consumers.in_flight_holder

    def counted(key: str):
        lookups.append(key)
        return real_lookup(key)

    monkeypatch.setattr(chat.consumers, "in_flight_holder", counted)
    communicator = await socket_for(staff_user, conversation.pk)
    for _ in range(30):
        await communicator.send_to(text_data=json.dumps({"action": "stop"}))
    answers = [await communicator.receive_from(timeout=10) for _ in range(30)]
    await communicator.disconnect()
    assert all('data-busy="false"' in answer for answer in answers)  # each one answered
    assert len(lookups) == 1


# --- After a crash: the answer and the lock a dead process left ----------------------------------
async def test_a_retry_after_the_answering_process_died_is_answered_not_refused(
    staff_user, leave_kb, settings
):
    """The process answering died (its answer left `streaming`, its heartbeat stopped): a
    retry of the same message id less than a minute later gets the stored part, marked
    interrupted, at once; not a 409 after waiting."""
    settings.CHAT_ANSWER_WAIT_SECONDS = 3
    conversation = await Conversation.objects.acreate(owner=staff_user, title="Leave")
    question = await Message.objects.acreate(
        conversation=conversation, role=Message.Role.USER, content=LEAVE_QUESTION
    )
    answer = await Message.objects.acreate(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        reply_to=question,
        content="",
    )
    died = timezone.now() - timedelta(seconds=50)  # its last heartbeat
    await Message.objects.filter(pk=answer.pk).aupdate(created_at=died, heartbeat_at=died)

    events = await collect(
        user=staff_user,
        question=LEAVE_QUESTION,
        message_id=question.pk,
        conversation_id=conversation.pk,
    )
    assert [e.type for e in events][0] == "answer_start"
    await answer.arefresh_from_db()
    assert answer.status == Message.Status.INTERRUPTED


async def test_a_live_answer_keeps_its_heartbeat_and_its_lock(
    staff_user, leave_kb, settings, monkeypatch
):
    """While an answer streams, its heartbeat and its conversation's lock are renewed: a
    slow answer outlives both their lapse times (shortened here to a second)."""
    settings.CHAT_STREAM_DELAY_MS = 700
    monkeypatch.setattr(chat.services, "HEARTBEAT_SECONDS", 0.3)
    monkeypatch.setattr(chat.consumers, "IN_FLIGHT_SECONDS", 1)
    monkeypatch.setattr(chat.consumers, "IN_FLIGHT_RENEW_SECONDS", 0.3)
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    while '-body">' not in await communicator.receive_from(timeout=30):
        pass  # streaming
    await asyncio.sleep(1.5)
    holder = await database_sync_to_async(in_flight_holder)(f"conversation:{conversation_id}")
    answer = await Message.objects.aget(conversation_id=conversation_id, role="assistant")
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()
    assert holder is not None  # renewed past its one second
    assert answer.status == Message.Status.STREAMING
    assert answer.heartbeat_at - answer.created_at >= timedelta(seconds=0.3)
    assert any('data-status="complete"' in f for f in fragments)
