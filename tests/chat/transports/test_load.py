"""Load (docs/product.md §10): 50 staff users, each with a conversation of their own open over a
real WebSocket to a live daphne on loopback, ask 5 questions each at once (each as soon as the
previous one is answered): 250 exchanges. Then every question and every answer is stored
exactly once, every answer is complete with its citations, none is left `streaming`, and the
rate limit is counted per user: the server allows 5 questions per user and day, so all 250 are
admitted (a limit shared between users would have turned away all but 5) and a sixth question
of one user is refused. The flood rule is off on this server: it would turn away a user who
asks 5 questions in 8 s, which is what these users do. Prints the p95 time to the first answer
event. Bounded: 60 s per exchange, 150 s in all."""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import time
import uuid
from dataclasses import dataclass, field

import pytest
from django.db import connection
from websockets.asyncio.client import connect

from chat.models import Citation, Conversation, Message
from lab.benchmark.clients import Client, clients_create
from tests.support.knowledge_base import (
    EXPENSES_TEXTS,
    LEAVE_TEXTS,
    SECURITY_TEXTS,
    document_create,
)
from tests.support.live_server import daphne_server, database_url_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SESSIONS = 50
QUESTIONS = [
    "How many days of paid annual leave do full-time employees receive?",
    "How many days of unused annual leave may be carried over into the next year?",
    "What is the daily meal allowance while travelling?",
    "How many characters must passwords have at least?",
    "Within how many days of the purchase must expense claims be filed?",
]
EXCHANGE_TIMEOUT = 60.0
RUN_TIMEOUT = 150.0
_DELTA = re.compile(r'hx-swap-oob="beforeend:#msg-[0-9a-f-]+-body"')
_MARKER = re.compile(r"\[(\d+)\]")


@dataclass
class Conversed:
    """What one user's socket saw."""

    conversation_id: str
    message_ids: list[str] = field(default_factory=list)
    first_event_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sixth: str = ""  # the reply to a question past the limit


async def exchange(socket, question: str, message_id: str) -> tuple[float | None, list[str]]:
    """Send one question as the composer does; read until the chat is idle again. A question
    sent while the socket still winds up the previous answer is told to wait (the idle state
    can come a moment before the answer's task ends): it is sent again."""
    payload = json.dumps({"action": "send", "message": question, "message_id": message_id})
    started = time.perf_counter()
    await socket.send(payload)
    first, errors, accepted = None, [], False
    while True:
        frame = await socket.recv()
        if not accepted and "wait for the current answer" in frame:
            await asyncio.sleep(0.05)
            await socket.send(payload)
            continue
        accepted = accepted or 'data-busy="true"' in frame
        if first is None and (_DELTA.search(frame) or "data-refusal" in frame):
            first = time.perf_counter() - started
        if "data-notice" in frame or 'data-status="error"' in frame:
            errors.append(re.sub(r"<[^>]+>", " ", frame)[:200])
        if 'data-busy="false"' in frame and (accepted or errors):
            return first, errors


async def converse(url: str, client: Client, ready: asyncio.Barrier, ask_sixth: bool) -> Conversed:
    seen = Conversed(conversation_id=str(uuid.uuid4()))
    socket_url = url.replace("http://", "ws://") + f"/ws/chat/{seen.conversation_id}/"
    async with connect(
        socket_url,
        origin=url,
        additional_headers={"Cookie": client.cookie},
        open_timeout=60,
        max_size=None,
        proxy=None,
    ) as socket:
        await ready.wait()
        for question in QUESTIONS:
            message_id = str(uuid.uuid4())
            seen.message_ids.append(message_id)
            try:
                async with asyncio.timeout(EXCHANGE_TIMEOUT):
                    first, errors = await exchange(socket, question, message_id)
            except TimeoutError:
                seen.errors.append(f"no end within {EXCHANGE_TIMEOUT} s: {question}")
                return seen
            seen.errors += errors
            if first is None:
                seen.errors.append(f"no answer event: {question}")
            else:
                seen.first_event_s.append(first)
        if ask_sixth:
            _, notices = await exchange(
                socket, "And how many for part-time staff?", str(uuid.uuid4())
            )
            seen.sixth = " ".join(notices)
    return seen


async def run_all(url: str, clients: list[Client]) -> list[Conversed]:
    ready = asyncio.Barrier(len(clients))
    async with asyncio.timeout(RUN_TIMEOUT):
        return await asyncio.gather(
            *(converse(url, client, ready, ask_sixth=i == 0) for i, client in enumerate(clients))
        )


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def test_fifty_concurrent_conversations_of_five_questions_each_store_everything_once():
    for title, texts in (("Staff handbook", LEAVE_TEXTS), ("Expenses policy", EXPENSES_TEXTS),
                         ("Security policy", SECURITY_TEXTS)):  # fmt: skip
        document_create(title=title, texts=texts)
    clients = clients_create(SESSIONS)
    window_day = int(time.time() // 86400)
    environment = {
        "CHAT_RATE_LIMIT": f"{len(QUESTIONS)}/d",
        "CHAT_FLOOD_MIN_INTERVAL": "0",
        "CHAT_STREAM_DELAY_MS": "0",
    }
    with daphne_server(database_url_of(connection.settings_dict), env=environment) as url:
        started = time.perf_counter()
        seen = asyncio.run(run_all(url, clients))
        elapsed = time.perf_counter() - started
    firsts = [s for conversed in seen for s in conversed.first_event_s]
    print(
        f"\nload: {SESSIONS} WebSocket conversations x {len(QUESTIONS)} questions in "
        f"{elapsed:.1f} s; time to first answer event p50 {statistics.median(firsts):.3f} s, "
        f"p95 {p95(firsts):.3f} s, max {max(firsts):.3f} s"
    )

    assert [c.errors for c in seen if c.errors] == []
    assert len(firsts) == SESSIONS * len(QUESTIONS)
    # Counted per user: the 5 questions of each of the 50 users went through, a sixth not.
    if int(time.time() // 86400) == window_day:  # (not if the run crossed midnight UTC)
        assert "faster than the limit allows" in seen[0].sixth
    # Stored exactly once: each user's conversation holds their 5 questions (under the ids
    # sent, in order) and one complete answer to each, citing what its markers name.
    for client, conversed in zip(clients, seen, strict=True):
        conversation = Conversation.objects.get(pk=conversed.conversation_id)
        assert conversation.owner.username == client.username
        questions = list(
            Message.objects.filter(conversation=conversation, role="user").order_by("created_at")
        )
        assert [str(q.pk) for q in questions] == conversed.message_ids
        assert [q.content for q in questions] == QUESTIONS
        answers = Message.objects.filter(conversation=conversation, role="assistant")
        assert sorted(str(a.reply_to_id) for a in answers) == sorted(conversed.message_ids)
        for answer in answers:
            assert answer.status == Message.Status.COMPLETE, answer.content
            cited = set(answer.citations.values_list("n", flat=True))
            assert cited and cited == {int(n) for n in _MARKER.findall(answer.content)}
    assert Message.objects.count() == 2 * SESSIONS * len(QUESTIONS)
    assert Citation.objects.filter(message__role="assistant").exists()
    assert not Message.objects.filter(status=Message.Status.STREAMING).exists()
