"""Who may do what over the conversation WebSocket, against a real daphne with real WebSocket
clients (session cookie and Origin, as the browser sends them): connecting × {anonymous,
signed-in non-staff, another staff user, the owner} × {shared, private, not yet created
conversation}, then every action the consumer accepts (send, regenerate, retry, stop, and an
unknown one) from a socket that may only read, and from a socket of one's own aimed at
someone else's private question; and no fragment of a private conversation ever reaches
another user's socket, while it is being answered or in the sidebar another user is sent."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from chat.models import Conversation, Message
from tests.support.knowledge_base import LEAVE_TEXTS, document_create

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "Zanzibar salary band"  # in the private conversation's title, question and answer
LEAVE_QUESTION = "How many days of paid annual leave do full-time employees receive?"
OPEN = "open"


@pytest.fixture
def people(django_user_model, staff_user, other_staff_user):
    visitor = django_user_model.objects.create_user(username="visitor")
    return {"anonymous": None, "non-staff": visitor, "other staff": other_staff_user,
            "owner": staff_user}  # fmt: skip


@pytest.fixture
def conversations(people):
    """The owner's shared and private conversations, each with one answered question, and the
    id of a conversation nobody has created yet."""
    made = {}
    for name, private in (("shared", False), ("private", True)):
        words = SECRET if private else "Shared travel question"
        conversation = Conversation.objects.create(
            owner=people["owner"], is_private=private, title=words
        )
        question = Message.objects.create(conversation=conversation, role="user", content=words)
        answer = Message.objects.create(
            conversation=conversation, role="assistant", content=f"{words}. [1]", reply_to=question
        )
        made[name] = {"id": str(conversation.pk), "question": str(question.pk),
                      "answer": str(answer.pk), "text": words}  # fmt: skip
    made["new"] = {"id": str(uuid.uuid4())}
    return made


def cookie_of(user) -> str:
    if user is None:
        return ""
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}"


def socket_to(url: str, user, conversation_id: str) -> ClientConnection:
    headers = {"Origin": url}
    if user is not None:
        headers["Cookie"] = cookie_of(user)
    socket_url = url.replace("http://", "ws://") + f"/ws/chat/{conversation_id}/"
    return connect(socket_url, additional_headers=headers, open_timeout=30)


def outcome(socket: ClientConnection) -> tuple[str, list[str]]:
    """ "open" when the socket stays open, else its close code; and what it received."""
    received = []
    try:
        while True:
            received.append(socket.recv(timeout=0.5))
    except TimeoutError:
        return OPEN, received
    except ConnectionClosed as closed:
        return str(closed.rcvd.code if closed.rcvd else None), received


def until_idle(socket: ClientConnection, *, timeout: float = 60) -> list[str]:
    fragments = []
    while True:
        fragment = socket.recv(timeout=timeout)
        fragments.append(fragment)
        if 'id="chat-state"' in fragment and 'data-busy="false"' in fragment:
            return fragments


def nothing_within(socket: ClientConnection, seconds: float) -> list[str]:
    received = []
    try:
        while True:
            received.append(socket.recv(timeout=seconds))
    except TimeoutError:
        return received


CONNECT = {
    "anonymous": {"shared": "4401", "private": "4401", "new": "4401"},
    "non-staff": {"shared": "4403", "private": "4403", "new": "4403"},
    "other staff": {"shared": OPEN, "private": "4403", "new": OPEN},
    "owner": {"shared": OPEN, "private": OPEN, "new": OPEN},
}


def test_connecting_answers_each_role_and_conversation_with_the_exact_close_code(
    live_server_url, people, conversations
):
    seen = {}
    for role, user in people.items():
        seen[role] = {}
        for name, conversation in conversations.items():
            with socket_to(live_server_url, user, conversation["id"]) as socket:
                code, received = outcome(socket)
            seen[role][name] = code
            assert received == [], (role, name)  # a refused socket is told nothing
    assert seen == CONNECT


def test_a_reader_of_a_shared_conversation_can_do_nothing_but_read(
    live_server_url, people, conversations
):
    shared = conversations["shared"]
    before = list(Message.objects.order_by("pk").values_list("pk", "content", "status"))
    with socket_to(live_server_url, people["other staff"], shared["id"]) as socket:
        replies = {}
        for action, extra in (
            ("send", {"message": "Can I post here?", "message_id": str(uuid.uuid4())}),
            ("regenerate", {"message_id": shared["question"]}),
            ("retry", {"message": shared["text"], "message_id": shared["question"]}),
        ):
            socket.send(json.dumps({"action": action, **extra}))
            replies[action] = "".join(until_idle(socket))
        socket.send(json.dumps({"action": "stop"}))
        replies["stop"] = "".join(until_idle(socket))
        socket.send(json.dumps({"action": "rename", "title": "Mine now"}))
        replies["rename"] = socket.recv(timeout=10)

    for action in ("send", "regenerate", "retry"):
        assert "only its owner can ask questions" in replies[action], action
        assert 'data-busy="true"' not in replies[action], action
    assert "data-notice" not in replies["stop"] and 'data-busy="false"' in replies["stop"]
    assert "Unknown action: rename" in replies["rename"]
    after = list(Message.objects.order_by("pk").values_list("pk", "content", "status"))
    assert after == before
    assert Conversation.objects.get(pk=shared["id"]).title == shared["text"]


def test_ones_own_socket_cannot_reach_a_private_question_of_someone_else(
    live_server_url, people, conversations
):
    private = conversations["private"]
    answer_before = Message.objects.get(pk=private["answer"])
    attempts = {
        "regenerate": {"action": "regenerate", "message_id": private["question"]},
        "retry": {"action": "retry", "message": "guess", "message_id": private["question"]},
        "send": {"action": "send", "message": "guess", "message_id": private["question"]},
        "send as the answer": {"action": "send", "message": "x", "message_id": private["answer"]},
    }
    replies = {}
    with socket_to(live_server_url, people["other staff"], str(uuid.uuid4())) as socket:
        for name, payload in attempts.items():
            socket.send(json.dumps(payload))
            replies[name] = "".join(until_idle(socket))

    assert "no such question in this conversation" in replies["regenerate"]
    for name in ("retry", "send", "send as the answer"):
        assert "already used by another message" in replies[name], name
    for name, reply in replies.items():
        assert SECRET not in reply and private["id"] not in reply, name
    answer_after = Message.objects.get(pk=private["answer"])
    assert (answer_after.content, answer_after.status) == (answer_before.content, "complete")
    assert Message.objects.filter(conversation_id=private["id"]).count() == 2


def test_a_private_answer_streams_only_to_its_owners_socket(live_server_url, people, conversations):
    document_create(title="Staff handbook", texts=LEAVE_TEXTS, pages=[3, 4])
    private, shared = conversations["private"], conversations["shared"]
    other = people["other staff"]
    with (
        socket_to(live_server_url, other, shared["id"]) as on_shared,
        socket_to(live_server_url, other, str(uuid.uuid4())) as on_new,
        socket_to(live_server_url, people["owner"], private["id"]) as owners,
    ):
        question = f"{LEAVE_QUESTION} ({SECRET})"
        owners.send(json.dumps({"action": "send", "message": question,
                                "message_id": str(uuid.uuid4())}))  # fmt: skip
        owners_fragments = until_idle(owners)
        stray = nothing_within(on_shared, 0.5) + nothing_within(on_new, 0.5)
        # Then the other user asks in a conversation of their own: the sidebar they are sent
        # lists the shared conversation, not the private one.
        on_new.send(json.dumps({"action": "send", "message": LEAVE_QUESTION,
                                "message_id": str(uuid.uuid4())}))  # fmt: skip
        others_fragments = until_idle(on_new)

    owners_text = "".join(owners_fragments)
    assert "25 days" in owners_text and SECRET in owners_text
    assert stray == []
    others_text = "".join(others_fragments)
    assert 'id="conversation-list" hx-swap-oob="true"' in others_text
    assert shared["id"] in others_text
    assert SECRET not in others_text and private["id"] not in others_text
    answer = Message.objects.get(conversation_id=private["id"], role="assistant",
                                 reply_to__content=question)  # fmt: skip
    assert answer.status == "complete"
