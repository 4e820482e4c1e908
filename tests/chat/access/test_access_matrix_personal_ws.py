"""A personal file over the conversation's WebSocket (docs/decisions/0081-personal-files.md):
its owner asks with `file_ids` and the answer's frames cite "your file · offer.pdf"; other
staff and a superuser, on the same shared conversation, receive nothing of it on connect nor
when they try to post or replay; someone else's `file_ids` are refused. Every raw frame is
checked for the file's text."""

from __future__ import annotations

import json
import uuid

import pytest
from channels.db import database_sync_to_async

from chat.models import Conversation
from tests.support.clients import fragments_until_idle, socket_for
from tests.support.knowledge_base import document_create
from tests.support.personal import personal_file_create
from tests.support.readers import readers_create

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "How much is the Zanzibarine signing bonus in my offer?"
FILE_TEXTS = ["The Zanzibarine signing bonus of 7,250 pounds is paid after the probation period."]
SECRET = "7,250"


def _setup() -> dict:
    people = readers_create(with_outsiders=False)
    people.pop("hr")
    document_create(title="Keepers", texts=["Keepers wind the lens clockwork every four hours."])
    conversation = Conversation.objects.create(
        owner=people["asker"], is_private=False, title=QUESTION
    )
    offer = personal_file_create(people["asker"], title="offer.pdf", texts=FILE_TEXTS)
    return {"people": people, "conversation": conversation, "file": offer}


def send(shared, **fields) -> str:
    return json.dumps(
        {"action": "send", "message": QUESTION, "message_id": str(uuid.uuid4()), **fields}
    )


async def frames_of(user, conversation_id, *payloads: str, nothing_on_connect: bool = True):
    socket = await socket_for(user, conversation_id)
    frames = []
    try:
        if nothing_on_connect:
            assert await socket.receive_nothing(timeout=0.3)
        for payload in payloads:
            await socket.send_to(text_data=payload)
            frames += await fragments_until_idle(socket)
    finally:
        await socket.disconnect()
    return frames


async def test_the_owner_is_answered_from_the_file_and_others_receive_nothing_of_it():
    shared = await database_sync_to_async(_setup)()
    people, conversation = shared["people"], shared["conversation"]

    owner_frames = await frames_of(
        people["asker"], conversation.pk, send(shared, file_ids=[shared["file"].pk])
    )
    assert any(SECRET in frame for frame in owner_frames)
    assert any("your file · offer.pdf" in frame for frame in owner_frames)

    for role in ("reader by group", "staff", "superuser", "document manager"):
        frames = await frames_of(
            people[role], conversation.pk, send(shared), send(shared, file_ids=[shared["file"].pk])
        )
        text = "".join(frames)
        assert SECRET not in text, role
        assert "offer.pdf" not in text, role


async def test_someone_elses_file_ids_are_refused_in_their_own_conversation():
    shared = await database_sync_to_async(_setup)()
    other = shared["people"]["staff"]
    theirs = await Conversation.objects.acreate(owner=other, title="Mine")

    frames = await frames_of(other, theirs.pk, send(shared, file_ids=[shared["file"].pk]))

    text = "".join(frames)
    assert SECRET not in text
    assert "offer.pdf" not in text
    assert "Unknown file ids" in text
