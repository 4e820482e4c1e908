"""Fixtures of the chat tests: controlled knowledge bases and a way to run the pipeline."""

from __future__ import annotations

import uuid

import pytest

from chat.answering.events import Event
from chat.answering.pipeline import AnswerOptions, answer_stream
from tests.chat.kb import EXPENSES_TEXTS, LEAVE_TEXTS, SECURITY_TEXTS, document_create
from tests.support.live_server import daphne_server, database_url_of

# Streamed pieces are paced on the test server, so a test can observe a stream in progress.
LIVE_SERVER_DELAY_MS = 120


@pytest.fixture(scope="session")
def live_server_url(django_db_setup):
    """daphne serving the app on the test database, started once per test session."""
    from django.db import connection

    with daphne_server(
        database_url_of(connection.settings_dict),
        env={"CHAT_STREAM_DELAY_MS": str(LIVE_SERVER_DELAY_MS)},
    ) as url:
        yield url


@pytest.fixture
def policies_kb(db):
    """Three small policies: the handbook (pages 3-4), expenses and security."""
    return {
        "handbook": document_create(
            title="Staff handbook",
            texts=LEAVE_TEXTS,
            pages=[3, 4],
            sections=["Leave > Annual leave", "Leave > Carry-over"],
            url="https://intranet.example/handbook",
        ),
        "expenses": document_create(
            title="Expenses policy", texts=EXPENSES_TEXTS, pages=[1, 2], sections=None
        ),
        "security": document_create(
            title="Security policy", texts=SECURITY_TEXTS, sections=["Passwords"]
        ),
    }


async def collect(*, user, question, message_id=None, options=None, **kwargs) -> list[Event]:
    """Every event of one exchange."""
    return [
        event
        async for event in answer_stream(
            user=user,
            question=question,
            message_id=message_id or uuid.uuid4(),
            options=options or AnswerOptions(),
            **kwargs,
        )
    ]
