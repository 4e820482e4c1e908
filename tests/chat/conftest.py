"""Fixtures of the chat tests: controlled knowledge bases and a way to run the pipeline."""

from __future__ import annotations

import json
import uuid

import pytest
from django.db import connection

from chat.answering.events import Event
from chat.answering.pipeline import AnswerOptions, answer_stream
from tests.chat.kb import EXPENSES_TEXTS, LEAVE_TEXTS, SECURITY_TEXTS, document_create
from tests.live_server import daphne_server, database_url_of

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


# --- A tiny labelled dataset (eval format) for the evaluate and bench commands ----------
DOCUMENTS = [
    {
        "id": "Lighthouses",
        "title": "Lighthouses",
        "format": "markdown",
        "text": "# Lighthouses\n\n"
        "The Eddystone Lighthouse stands on rocks fourteen kilometres south of Plymouth. "
        "The present tower was designed by James Douglass and lit in 1882.\n\n"
        "A lighthouse keeper trimmed the wicks and wound the clockwork every few hours. "
        "Most lighthouses in Britain were automated by the end of the twentieth century.\n\n"
        "The Fresnel lens, invented by Augustin-Jean Fresnel in 1822, made the beam visible "
        "from much further away than mirrors could.",
    },
    {
        "id": "Bees",
        "title": "Honey bees",
        "format": "markdown",
        "text": "# Honey bees\n\n"
        "A honey bee colony has one queen, thousands of female workers and, in summer, a few "
        "hundred male drones.\n\n"
        "Worker bees communicate the direction of flowers with the waggle dance, first "
        "described by Karl von Frisch.\n\n"
        "Honey is made from nectar that the bees evaporate in the comb until it holds less "
        "than a fifth water.",
    },
]
QUESTIONS = [
    {
        "id": "q1",
        "question": "Who designed the present Eddystone Lighthouse tower?",
        "kind": "answerable",
        "expect": "answer",
        "document": "Lighthouses",
        "answers": ["James Douglass"],
    },
    {
        "id": "q2",
        "question": "Who first described the waggle dance of bees?",
        "kind": "answerable",
        "expect": "answer",
        "document": "Bees",
        "answers": ["Karl von Frisch"],
    },
    {
        "id": "q3",
        "question": "What is the boiling point of liquid nitrogen at sea level?",
        "kind": "off_kb",
        "expect": "refusal",
        "document": None,
    },
]


@pytest.fixture
def tiny_dataset(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"name": "tiny", "documents": DOCUMENTS, "questions": QUESTIONS}))
    return path


def databases() -> set[str]:
    """Names of the databases on the server (to prove throwaway ones are dropped)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database")
        return {row[0] for row in cursor.fetchall()}
