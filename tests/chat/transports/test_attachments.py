"""Asking about one's own file through `POST /api/chat` (docs/decisions/0081-personal-files.md):
`file_ids` attaches the asker's files to the conversation, whose answers then cite them as
"your file · <name>"; the same question elsewhere does not use them; nobody else can attach
them; once purged, the owner's answer keeps its text and says the file has expired."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from channels.db import database_sync_to_async
from django.test import AsyncClient
from django.utils import timezone

from chat.models import Attachment, Message
from knowledge.personal import personal_files_purge_expired
from tests.support.knowledge_base import document_create
from tests.support.personal import personal_file_create

QUESTION = "How much is the Zanzibarine signing bonus in my offer?"
FILE_TEXTS = [
    "The Zanzibarine signing bonus of 7,250 pounds is paid after the probation period.",
    "The probation period lasts six months from the start date.",
]


async def ask(client: AsyncClient, **fields) -> tuple[int, str]:
    body = {"message": QUESTION, "message_id": str(uuid.uuid4()), **fields}
    response = await client.post("/api/chat", json.dumps(body), "application/json")
    if response.streaming:
        text = b"".join([part async for part in response.streaming_content]).decode()
    else:
        text = response.content.decode()
    return response.status_code, text


def conversation_of(text: str) -> str:
    start = next(line for line in text.splitlines() if line.startswith("data: "))
    return json.loads(start.removeprefix("data: "))["conversation_id"]


@pytest.fixture
def offer(db, staff_user):
    document_create(title="Keepers", texts=["Keepers wind the lens clockwork every four hours."])
    return personal_file_create(staff_user, title="offer.pdf", texts=FILE_TEXTS, pages=[2, 3])


@pytest.fixture
async def owner(staff_user):
    client = AsyncClient()
    await client.aforce_login(staff_user)
    return client


@pytest.mark.django_db(transaction=True)
async def test_an_attached_file_answers_its_owner_with_a_labelled_citation(owner, offer):
    status, text = await ask(owner, file_ids=[offer.pk])

    assert status == 200, text
    assert "7,250" in text
    assert "your file · offer.pdf" in text
    conversation_id = conversation_of(text)
    assert await Attachment.objects.filter(
        conversation_id=conversation_id, document=offer
    ).aexists()


@pytest.mark.django_db(transaction=True)
async def test_the_file_is_not_used_in_the_owners_other_conversations(owner, offer):
    status, text = await ask(owner)  # a new conversation, nothing attached

    assert "7,250" not in text
    assert "offer.pdf" not in text
    assert status in (200, 422)


@pytest.mark.django_db(transaction=True)
async def test_nobody_else_can_attach_the_file(offer, other_staff_user):
    other = AsyncClient()
    await other.aforce_login(other_staff_user)

    status, text = await ask(other, file_ids=[offer.pk])

    # Someone else's file is unknown to them: not-found, as for a document they may not read.
    assert status == 404
    assert json.loads(text)["error"]["details"]["file_ids"]
    assert "7,250" not in text and "offer.pdf" not in text
    assert not await Message.objects.aexists()  # refused before anything is stored


@pytest.mark.django_db(transaction=True)
async def test_bad_file_ids_are_refused_with_422(owner, offer):
    for bad in ("1", [0], [True], list(range(1, 30))):
        status, text = await ask(owner, file_ids=bad)
        assert status == 422, (bad, text)


@pytest.mark.django_db(transaction=True)
async def test_once_purged_the_owners_answer_keeps_its_text_and_says_the_file_expired(owner, offer):
    _, text = await ask(owner, file_ids=[offer.pk])
    conversation_id = conversation_of(text)

    purged = await database_sync_to_async(personal_files_purge_expired)(
        now=timezone.now() + timedelta(days=2)
    )
    page = (await owner.get(f"/c/{conversation_id}/")).content.decode()

    assert purged == 1
    assert "7,250" in page
    assert "Your file has expired or was removed." in page
