"""What a client of the chat reads: the conversation WebSocket's fragments (in-process, through
channels' WebsocketCommunicator) and the SSE frames of POST /api/chat (over real HTTP)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import httpx
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator

from chat.routing import websocket_urlpatterns


async def socket_for(user, conversation_id) -> WebsocketCommunicator:
    communicator = WebsocketCommunicator(
        URLRouter(websocket_urlpatterns), f"/ws/chat/{conversation_id}/"
    )
    communicator.scope["user"] = user
    connected, _ = await communicator.connect()
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
