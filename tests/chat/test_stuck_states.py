"""States a page could stay stuck in: the database failing while a question is admitted or
while its answer's end is rendered (the page is told and its composer freed), and a burst of
Stop frames (bounded: no query per frame). Over a real socket, real database, real model; the
failure is a real `OperationalError` raised where the database call would be."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import OperationalError

import chat.consumers
from chat.models import Conversation, Message
from tests.support.clients import fragments_until_idle, send_payload, socket_for
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
    communicator = await socket_for(staff_user, uuid.uuid4())
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    fragments = await fragments_until_idle(communicator, timeout=10)
    await communicator.disconnect()
    assert_told_and_freed(fragments)


async def test_a_database_failure_rendering_the_end_is_shown_and_frees_the_composer(
    staff_user, leave_kb, monkeypatch
):
    monkeypatch.setattr(chat.consumers, "message_answer_with_citations", _database_gone)
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    fragments = await fragments_until_idle(communicator, timeout=30)
    await communicator.disconnect()
    assert_told_and_freed(fragments)
    # The answer itself was stored: a reload shows it.
    answer = await Message.objects.aget(conversation_id=conversation_id, role="assistant")
    assert answer.status == Message.Status.COMPLETE


async def test_the_conversation_is_free_again_after_a_failure_while_answering(
    staff_user, leave_kb, monkeypatch
):
    """The lock taken by the admission is released when rendering the end fails: the next
    question is answered, not refused as "another question is still being answered"."""
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    with monkeypatch.context() as patch:
        patch.setattr(chat.consumers, "message_answer_with_citations", _database_gone)
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
