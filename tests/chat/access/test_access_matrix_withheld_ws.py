"""Withheld answers over the conversation's WebSocket (docs/decisions/0080-withheld-answers.md):
what each kind of reader receives on a shared conversation whose answer cites a restricted
collection (nothing on connect; a refusal when they try to post or replay), and a stored
answer replayed for a repeated message id, decided by what its asker may read at the time of
the replay. Every raw frame is checked for the restricted text."""

from __future__ import annotations

import json

import pytest
from channels.db import database_sync_to_async

from chat.models import Conversation
from chat.withheld import Withheld
from knowledge.collections import collection_create
from tests.support.clients import fragments_until_idle, socket_for
from tests.support.conversations import exchange_create
from tests.support.knowledge_base import document_create
from tests.support.readers import readers_create

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "What is the salary band for a Grade 7 analyst?"
RESTRICTED_CHUNK = "The Quetzal band for Grade 7 analysts runs from 41,000 to 48,000 pounds."
RESTRICTED_ANSWER = "Grade 7 analysts are paid on the Quetzal band, 41,000 to 48,000 pounds. [1]"
SECRET = "Quetzal"


def _setup() -> dict:
    people = readers_create(with_outsiders=False)
    hr = people.pop("hr")
    hr_only = collection_create(name="HR only", groups=[hr], users=[people["reader by user"]])
    document = document_create(title="Pay bands", texts=[RESTRICTED_CHUNK], collection=hr_only)
    conversation = Conversation.objects.create(
        owner=people["asker"], is_private=False, title=QUESTION
    )
    question, answer = exchange_create(
        conversation, question=QUESTION, answer=RESTRICTED_ANSWER, cited=list(document.chunks.all())
    )
    return {"people": people, "hr": hr, "document": document, "conversation": conversation,
            "question": question, "answer": answer}  # fmt: skip


@pytest.fixture
def shared(django_user_model):
    return _setup()


def repeated(shared, action: str = "send") -> str:
    """The stored question sent again under its own message id (a retry, a second tab)."""
    return json.dumps(
        {"action": action, "message": QUESTION, "message_id": str(shared["question"].pk)}
    )


async def frames_of(user, shared, *payloads: str) -> list[str]:
    """Every frame `user`'s socket to the conversation receives: on connect, then after each of
    `payloads`."""
    socket = await socket_for(user, shared["conversation"].pk)
    frames = []
    try:
        assert await socket.receive_nothing(timeout=0.3)  # nothing on connect
        for payload in payloads:
            await socket.send_to(text_data=payload)
            frames += await fragments_until_idle(socket)
    finally:
        await socket.disconnect()
    return frames


@pytest.mark.parametrize(
    "role", ["reader by group", "reader by user", "staff", "superuser", "document manager"]
)
async def test_a_reader_of_the_shared_conversation_receives_no_restricted_frame(shared, role):
    frames = await frames_of(
        shared["people"][role], shared, repeated(shared), repeated(shared, "retry")
    )

    assert all("only its owner can ask questions" in f for f in frames if "notice" in f)
    assert not any(SECRET in frame for frame in frames)


async def test_a_replayed_answer_is_withheld_once_its_asker_has_left_the_group(shared):
    asker = shared["people"]["asker"]
    before = await frames_of(asker, shared, repeated(shared))
    assert any(SECRET in frame for frame in before)  # still in HR: the stored answer again

    await database_sync_to_async(asker.groups.remove)(shared["hr"])
    after = await frames_of(asker, shared, repeated(shared), repeated(shared, "retry"))

    assert not any(SECRET in frame for frame in after)
    assert not any("Pay bands" in frame for frame in after)
    joined = "".join(after)
    assert Withheld.ACCESS.notice.replace("'", "&#x27;") in joined
    assert f'data-withheld="{Withheld.ACCESS}"' in joined


async def test_a_replayed_answer_citing_a_disabled_document_is_withheld_as_withdrawn(shared):
    document = shared["document"]
    document.enabled = False
    await database_sync_to_async(document.save)(update_fields=["enabled"])

    frames = await frames_of(shared["people"]["asker"], shared, repeated(shared))

    assert not any(SECRET in frame for frame in frames)
    assert f'data-withheld="{Withheld.WITHDRAWN}"' in "".join(frames)
