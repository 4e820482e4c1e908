"""What a client of the chat reads: the conversation WebSocket's fragments (in-process, through
channels' WebsocketCommunicator) and the SSE frames of POST /api/chat (over real HTTP)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.contrib.sessions.backends.db import SessionStore

from chat.routing import websocket_urlpatterns

# How long a test waits for the socket's accept (channels' WebsocketCommunicator waits 1 s by
# default, which a whole-suite run, three workers on two cores, once exceeded).
CONNECT_TIMEOUT_S = 30


def session_signed_in(user, **data) -> SessionStore:
    """A stored session signing `user` in, as `django.contrib.auth.login` makes it (`data`:
    more keys, e.g. a provider sign-in's time)."""
    session = SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.update(data)
    session.create()
    return session


async def socket_scoped(user, conversation_id) -> WebsocketCommunicator:
    """A socket to the conversation, not yet connected, whose scope holds `user` and, for a
    signed-in user, a stored session of theirs (what Channels' AuthMiddlewareStack puts there:
    the consumer reads the session again for each message)."""
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/chat/{conversation_id}/"
    )
    communicator.scope["user"] = user
    if user.is_authenticated:
        communicator.scope["session"] = await database_sync_to_async(session_signed_in)(user)
    return communicator


async def socket_for(user, conversation_id) -> WebsocketCommunicator:
    communicator = await socket_scoped(user, conversation_id)
    connected, _ = await communicator.connect(timeout=CONNECT_TIMEOUT_S)
    assert connected
    return communicator


def send_payload(question: str, **extra) -> str:
    payload = {"action": "send", "message": question, "message_id": str(uuid.uuid4())}
    return json.dumps({**payload, **extra})


async def fragments_until_idle(communicator, *, timeout: float = 30) -> list[str]:
    """Every fragment up to the one that says the conversation is idle again."""
    fragments = []
    while True:
        fragment = await communicator.receive_from(timeout=timeout)
        fragments.append(fragment)
        if 'id="chat-state"' in fragment and 'data-busy="false"' in fragment:
            return fragments


async def fragments_of_a_question(
    user, conversation_id, question: str, *, timeout: float = 30
) -> list[str]:
    """Every fragment one question asked on a socket of its own gets, up to the one that says
    the conversation is idle again; the socket is closed after."""
    communicator = await socket_for(user, conversation_id)
    await communicator.send_to(text_data=send_payload(question))
    fragments = await fragments_until_idle(communicator, timeout=timeout)
    await communicator.disconnect()
    return fragments


def sse_events(response: httpx.Response) -> Iterator[tuple[str, dict]]:
    """(event type, data) for each SSE frame, as soon as its blank line arrives."""
    event, data = None, []
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data.append(line.removeprefix("data: "))
        elif line == "" and event is not None:
            yield event, json.loads("\n".join(data))
            event, data = None, []
