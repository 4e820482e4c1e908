"""An answer left `streaming` by a process that died is released (marked interrupted) by age:
when a server starts, and when its conversation is read (page, API) or its question answered
again, so it never shows typing dots forever nor blocks Regenerate with a 409."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from chat.models import Conversation, Message
from chat.services import STALE_STREAMING, exchange_regenerate
from tests.support.conversations import exchange_create
from tests.support.live_server import database_url_of

pytestmark = pytest.mark.django_db


def streaming_exchange(owner, *, age: timedelta) -> tuple[Conversation, Message, Message]:
    conversation = Conversation.objects.create(owner=owner, title="Leave")
    question, answer = exchange_create(
        conversation,
        question="How many days of leave?",
        answer="Full-time staff get",
        status=Message.Status.STREAMING,
    )
    Message.objects.filter(pk=answer.pk).update(
        created_at=timezone.now() - age, heartbeat_at=timezone.now() - age
    )
    return conversation, question, answer


def status_of(message: Message) -> str:
    message.refresh_from_db()
    return message.status


def test_the_conversation_page_releases_an_orphaned_answer(client, staff_user):
    conversation, _, answer = streaming_exchange(staff_user, age=STALE_STREAMING * 2)
    _, _, live = streaming_exchange(staff_user, age=timedelta(seconds=5))
    client.force_login(staff_user)

    page = client.get(f"/c/{conversation.pk}/").content.decode()

    assert status_of(answer) == Message.Status.INTERRUPTED
    assert f"msg-{answer.pk}-typing" not in page
    assert status_of(live) == Message.Status.STREAMING  # still being answered: left alone


def test_the_messages_api_releases_an_orphaned_answer(client, staff_user):
    conversation, _, answer = streaming_exchange(staff_user, age=STALE_STREAMING * 2)
    client.force_login(staff_user)

    body = client.get(f"/api/conversations/{conversation.pk}/messages").json()

    statuses = {m["role"]: m["status"] for m in body["messages"]}
    assert statuses == {"user": "complete", "assistant": "interrupted"}
    assert status_of(answer) == Message.Status.INTERRUPTED


def test_regenerate_answers_an_orphaned_question_again_instead_of_409(staff_user):
    _, question, answer = streaming_exchange(staff_user, age=STALE_STREAMING * 2)

    claim = exchange_regenerate(user=staff_user, message_id=question.pk, mode="extractive", top_k=5)

    assert claim.answer.status == Message.Status.STREAMING
    assert not Message.objects.filter(pk=answer.pk).exists()  # replaced by the new answer


@pytest.mark.django_db(transaction=True)
def test_a_starting_server_releases_orphaned_answers(staff_user):
    _, _, orphan = streaming_exchange(staff_user, age=STALE_STREAMING * 2)
    _, _, live = streaming_exchange(staff_user, age=timedelta(seconds=5))

    result = subprocess.run(
        [sys.executable, "-c", "import config.asgi"],
        cwd=settings.BASE_DIR,
        env={
            **{k: v for k, v in os.environ.items() if k not in ("DB_POOL", "EMBEDDING_WARM_UP")},
            "DATABASE_URL": database_url_of(connection.settings_dict),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "EMBEDDING_WARM_UP": "0",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert result.returncode == 0, result.stderr
    assert status_of(orphan) == Message.Status.INTERRUPTED
    assert status_of(live) == Message.Status.STREAMING
