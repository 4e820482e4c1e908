"""Clients of the running server: simulated staff users asking questions over the WebSocket
(as the browser's composer does) and over SSE (as API clients do), and loading a conversation.

Each simulated user has its own account, API token and session. Times run from the moment the
question is sent: `first_ms` to the first piece of answer text or the refusal, `total_ms` to
the end of the exchange. What each transport counts as those events, and why:
docs/decisions/0058-bench-first-event-latency-and-cpu-per-question.md.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import import_module

import httpx
from django.conf import settings
from django.contrib.auth import (
    BACKEND_SESSION_KEY,
    HASH_SESSION_KEY,
    SESSION_KEY,
    get_user_model,
    load_backend,
)
from rest_framework.authtoken.models import Token
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus, WebSocketException

from lab.benchmark.server import RunningServer

EXCHANGE_TIMEOUT = 60.0  # seconds one question may take before it counts as an error
CONNECT_TIMEOUT = 60.0
RESEND_DELAY = 0.02
MAX_RESENDS = 100  # bounded: at most ~2 s of "still busy" before it counts as an error
USERNAME_PREFIX = "bench-client-"

_DELTA = re.compile(r'hx-swap-oob="beforeend:#msg-[0-9a-fA-F-]+-body"')
_BUSY = 'data-busy="true"'
_IDLE = 'data-busy="false"'
_NOTICE = "data-notice"
_REFUSAL = "data-refusal"
_ANSWER_ERROR = 'data-status="error"'
_TAG = re.compile(r"<[^>]+>")


class ClientError(RuntimeError):
    """A client could not talk to the server at all (connection refused, wrong status)."""


@dataclass(frozen=True)
class Client:
    """The credentials of one simulated user."""

    username: str
    token: str
    session_key: str

    @property
    def cookie(self) -> str:
        return f"{settings.SESSION_COOKIE_NAME}={self.session_key}"


def clients_create(count: int) -> list[Client]:
    """`count` staff users, each with an API token and a logged-in session (in the current
    database, which the server shares)."""
    session_store = import_module(settings.SESSION_ENGINE).SessionStore
    # The backend a session names must be able to load its user (`get_user`): the first such
    # one, as Django's test client chooses (the login-throttling backend only refuses logins).
    backend = next(
        path for path in settings.AUTHENTICATION_BACKENDS if hasattr(load_backend(path), "get_user")
    )
    clients = []
    for i in range(count):
        user, _ = get_user_model().objects.get_or_create(
            username=f"{USERNAME_PREFIX}{i + 1}", defaults={"is_staff": True}
        )
        token, _ = Token.objects.get_or_create(user=user)
        session = session_store()
        session[SESSION_KEY] = user._meta.pk.value_to_string(user)
        session[BACKEND_SESSION_KEY] = backend
        session[HASH_SESSION_KEY] = user.get_session_auth_hash()
        session.create()
        clients.append(
            Client(username=user.get_username(), token=token.key, session_key=session.session_key)
        )
    return clients


@dataclass
class Exchange:
    """One question's timings and how it ended: answer, refusal or error."""

    transport: str
    first_ms: float | None = None
    total_ms: float = 0.0
    outcome: str = "error"
    detail: str = ""
    resent: int = 0


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000


def _text_of(html: str, limit: int = 160) -> str:
    return " ".join(_TAG.sub(" ", html).split())[:limit]


# --- WebSocket --------------------------------------------------------------------------------
async def _ws_connect(server: RunningServer, client: Client) -> ClientConnection:
    url = f"{server.ws_url}/ws/chat/{uuid.uuid4()}/"
    try:
        return await connect(
            url,
            origin=server.origin,
            additional_headers={"Cookie": client.cookie},
            proxy=None,
            open_timeout=CONNECT_TIMEOUT,
            max_size=None,
        )
    except InvalidStatus as exc:
        raise ClientError(f"The WebSocket {url} was refused: {exc}") from exc
    except (OSError, WebSocketException, TimeoutError) as exc:
        raise ClientError(f"Could not open the WebSocket {url}: {exc}") from exc


async def _ws_exchange(socket: ClientConnection, question: str) -> Exchange:
    """Send one question as the composer does and read fragments until the chat is idle.

    A question sent while the consumer still holds the previous answer (the idle state can
    arrive a moment before it lets go) is answered with a notice and no busy state: it is sent
    again shortly, and its time still counts from the first send."""
    exchange = Exchange(transport="ws")
    payload = json.dumps(
        {
            "action": "send",
            "message": question,
            "message_id": str(uuid.uuid4()),
            "top_k": None,
            "document_ids": [],
            "is_private": False,
        }
    )
    started = time.perf_counter()
    await socket.send(payload)
    accepted = False
    while True:
        frame = await socket.recv()
        if isinstance(frame, bytes):
            frame = frame.decode(errors="replace")
        if not accepted:
            if _BUSY in frame:
                accepted = True
            elif _NOTICE in frame:
                if exchange.resent >= MAX_RESENDS:
                    exchange.detail = f"not accepted: {_text_of(frame)}"
                    exchange.total_ms = _ms_since(started)
                    return exchange
                exchange.resent += 1
                await asyncio.sleep(RESEND_DELAY)
                await socket.send(payload)
                continue
        if exchange.first_ms is None:
            if _DELTA.search(frame):
                exchange.first_ms, exchange.outcome = _ms_since(started), "answer"
            elif _REFUSAL in frame:
                exchange.first_ms, exchange.outcome = _ms_since(started), "refusal"
        if accepted and (_NOTICE in frame or _ANSWER_ERROR in frame):
            exchange.outcome, exchange.detail = "error", _text_of(frame)
        if accepted and _IDLE in frame:
            exchange.total_ms = _ms_since(started)
            if exchange.first_ms is None and exchange.outcome != "error":
                exchange.outcome, exchange.detail = "error", "ended without an answer"
            return exchange


async def ws_session(
    server: RunningServer,
    client: Client,
    questions: Sequence[str],
    ready: asyncio.Barrier,
    done: Callable[[], None] | None = None,
) -> list[Exchange]:
    """One user with one conversation open over the WebSocket, asking `questions` in turn
    (each as soon as the previous one is answered), starting when every client is connected."""
    results: list[Exchange] = []
    socket = await _ws_connect(server, client)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            await ready.wait()
        for question in questions:
            try:
                async with asyncio.timeout(EXCHANGE_TIMEOUT):
                    results.append(await _ws_exchange(socket, question))
                if done:
                    done()
            except TimeoutError:
                results.append(Exchange("ws", total_ms=EXCHANGE_TIMEOUT * 1000, detail="timeout"))
                break
            except WebSocketException as exc:
                results.append(Exchange("ws", detail=f"connection closed: {exc}"))
                break
    finally:
        await socket.close()
    return results


# --- SSE --------------------------------------------------------------------------------------
async def _sse_exchange(http: httpx.AsyncClient, question: str, conversation_id: str) -> Exchange:
    exchange = Exchange(transport="sse")
    payload = {
        "message": question,
        "message_id": str(uuid.uuid4()),
        "conversation_id": conversation_id,
    }
    started = time.perf_counter()
    try:
        async with http.stream("POST", "/api/chat", json=payload) as response:
            content_type = response.headers.get("content-type", "")
            if response.status_code != 200:
                body = (await response.aread()).decode(errors="replace")
                exchange.detail = f"HTTP {response.status_code}: {body[:160]}"
            elif content_type.startswith("text/event-stream"):
                async for line in response.aiter_lines():
                    if not line.startswith("event:"):
                        continue
                    kind = line.partition(":")[2].strip()
                    if exchange.first_ms is None and kind in ("answer_delta", "refusal"):
                        exchange.first_ms = _ms_since(started)
                        exchange.outcome = "answer" if kind == "answer_delta" else "refusal"
                    elif kind == "error":
                        exchange.outcome, exchange.detail = "error", "error event"
            else:
                body = json.loads(await response.aread())
                if isinstance(body, dict) and body.get("type") == "refusal":
                    exchange.first_ms, exchange.outcome = _ms_since(started), "refusal"
                else:
                    exchange.detail = f"unexpected body: {str(body)[:160]}"
    except (httpx.HTTPError, ValueError) as exc:
        exchange.outcome, exchange.detail = "error", f"{type(exc).__name__}: {exc}"
    exchange.total_ms = _ms_since(started)
    if exchange.first_ms is None and exchange.outcome != "error":
        exchange.outcome, exchange.detail = "error", "ended without an answer"
    return exchange


def _http_client(server: RunningServer, headers: dict[str, str]) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        base_url=server.http_url, headers=headers, timeout=EXCHANGE_TIMEOUT, trust_env=False
    )


async def sse_session(
    server: RunningServer,
    client: Client,
    questions: Sequence[str],
    ready: asyncio.Barrier,
    done: Callable[[], None] | None = None,
) -> list[Exchange]:
    """One API client with one conversation, asking `questions` in turn over POST /api/chat."""
    conversation_id = str(uuid.uuid4())
    results: list[Exchange] = []
    async with _http_client(server, {"Authorization": f"Token {client.token}"}) as http:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            await ready.wait()
        for question in questions:
            results.append(await _sse_exchange(http, question, conversation_id))
            if done:
                done()
    return results


async def load_run(
    server: RunningServer,
    *,
    transport: str,
    clients: Sequence[Client],
    questions: Sequence[Sequence[str]],
    done: Callable[[], None] | None = None,
) -> list[Exchange]:
    """Every client asks its questions at the same time (clients[i] asks questions[i]);
    `done()` after each exchange."""
    session = {"ws": ws_session, "sse": sse_session}[transport]
    ready = asyncio.Barrier(len(clients))
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(session(server, client, own, ready, done))
                for client, own in zip(clients, questions, strict=True)
            ]
    except ExceptionGroup as failed:  # the first failure says what went wrong
        raise failed.exceptions[0] from None
    return [exchange for task in tasks for exchange in task.result()]


# --- Conversation loads -----------------------------------------------------------------------
async def conversation_loads(
    server: RunningServer, client: Client, conversation_id: uuid.UUID, *, count: int, messages: int
) -> dict[str, list[float]]:
    """Load the conversation `count` times through the API and as the HTML page (alternately,
    after one unmeasured load of each). {"api": [ms...], "page": [ms...]}."""
    targets = {
        "api": (
            f"/api/conversations/{conversation_id}/messages",
            {"Authorization": f"Token {client.token}"},
        ),
        "page": (f"/c/{conversation_id}/", {"Cookie": client.cookie}),
    }
    times: dict[str, list[float]] = {name: [] for name in targets}
    async with _http_client(server, {}) as http:
        for round_ in range(count + 1):
            for name, (path, headers) in targets.items():
                started = time.perf_counter()
                response = await http.get(path, headers=headers)
                elapsed = _ms_since(started)
                if response.status_code != 200:
                    raise ClientError(f"GET {path} answered {response.status_code}.")
                if round_ == 0:
                    _check_loaded(name, response, messages)
                else:
                    times[name].append(elapsed)
    return times


def _check_loaded(name: str, response: httpx.Response, messages: int) -> None:
    """The first load of each kind must show the whole conversation."""
    if name == "api":
        found = len(response.json().get("messages", []))
    else:
        found = response.text.count('data-role="user"') + response.text.count(
            'data-role="assistant"'
        )
    if found != messages:
        raise ClientError(f"The conversation {name} shows {found} messages, not {messages}.")
