"""A Stop racing a send: what the socket renders after the Stop is looked up in the socket's own
conversation only. A send naming another conversation's question id, stopped before it is
refused, used to render that conversation's answer (found by the question id alone)."""

from __future__ import annotations

import json
import uuid

import pytest
from channels.db import database_sync_to_async

from chat.models import Conversation
from tests.support.clients import fragments_until_idle, socket_for
from tests.support.conversations import exchange_create

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "Band C of the 2026 pay scale is 61,400 euros"


def _private_exchange(owner):
    conversation = Conversation.objects.create(owner=owner, is_private=True, title="Pay")
    return exchange_create(conversation, question="What does band C pay?", answer=SECRET)


@pytest.mark.parametrize("attempt", range(3))
async def test_a_stop_naming_another_conversations_question_renders_nothing_of_it(
    staff_user, other_staff_user, attempt
):
    question, _ = await database_sync_to_async(_private_exchange)(other_staff_user)
    socket = await socket_for(staff_user, uuid.uuid4())
    await socket.send_to(
        text_data=json.dumps(
            {"action": "send", "message": "Hello there", "message_id": str(question.pk)}
        )
    )
    frames = [await socket.receive_from(timeout=30)]  # the exchange began: Stop it now
    await socket.send_to(text_data=json.dumps({"action": "stop"}))
    frames += await fragments_until_idle(socket)
    while not await socket.receive_nothing(timeout=0.5):  # the Stop's own state, if it came
        frames.append(await socket.receive_from())  # after the refusal
    await socket.disconnect()
    page = "".join(frames)
    assert "61,400" not in page and "pay scale" not in page
    assert f"msg-{question.pk}" in page  # only the question bubble this page itself showed
