"""Scale-out (docs/product.md §10): two daphne processes on different ports sharing PostgreSQL and
a Redis server (REDIS_URL: django-redis cache, channels-redis channel layer), as behind a load
balancer that does not keep a user on one process.

- A conversation started through one process is read and continued through the other.
- A Stop sent on a socket served by one process stops the answer running on the other (the
  in-flight lock in the shared cache names the running socket's channel; the Redis channel
  layer carries the Stop across), and only the owner's Stop does.
- The rate limit and the flood rule count one user's requests across both processes exactly.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection
from websockets.sync.client import ClientConnection, connect

from chat.models import Conversation, Message
from lab.benchmark.clients import Client, clients_create
from tests.support.knowledge_base import LEAVE_TEXTS, document_create
from tests.support.live_server import daphne_server, database_url_of
from tests.support.redis_server import redis_server

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RATE = 12  # requests per user and day on both servers
LEAVE_QUESTION = "How many days of paid annual leave do full-time employees receive?"
FOLLOW_UP = "How many unused days may be carried over into the next year?"


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@pytest.fixture(scope="module")
def servers(django_db_setup, django_db_blocker, redis_url):
    """Two daphne processes, same database, same Redis. Answers are paced (300 ms a piece)
    so that a Stop can be sent while one streams."""
    with django_db_blocker.unblock():
        database_url = database_url_of(connection.settings_dict)
    environment = {
        "REDIS_URL": redis_url,
        "CHAT_RATE_LIMIT": f"{RATE}/d",
        "CHAT_STREAM_DELAY_MS": "300",
    }
    with (
        daphne_server(database_url, env=environment) as first,
        daphne_server(database_url, env=environment) as second,
    ):
        yield first, second


def socket_to(url: str, client: Client, conversation_id: str) -> ClientConnection:
    socket_url = url.replace("http://", "ws://") + f"/ws/chat/{conversation_id}/"
    return connect(
        socket_url, additional_headers={"Origin": url, "Cookie": client.cookie}, open_timeout=60
    )


def ask(socket: ClientConnection, question: str) -> str:
    payload = {"action": "send", "message": question, "message_id": str(uuid.uuid4())}
    socket.send(json.dumps(payload))
    return payload["message_id"]


def until(socket: ClientConnection, needle: str, *, timeout: float = 90) -> list[str]:
    fragments = []
    while True:
        fragments.append(socket.recv(timeout=timeout))
        if needle in fragments[-1]:
            return fragments


IDLE = 'data-busy="false"'
DELTA = '-body">'


def test_a_conversation_started_on_one_process_is_read_and_continued_on_the_other(servers):
    first, second = servers
    document_create(title="Staff handbook", texts=LEAVE_TEXTS, pages=[3, 4])
    (client,) = clients_create(1)
    conversation_id = str(uuid.uuid4())
    with socket_to(first, client, conversation_id) as socket:
        ask(socket, LEAVE_QUESTION)
        assert "25 days" in "".join(until(socket, IDLE))

    headers = {"Authorization": f"Token {client.token}"}
    listed = httpx.get(f"{second}/api/conversations/{conversation_id}/messages", headers=headers)
    assert listed.status_code == 200
    assert [m["role"] for m in listed.json()["messages"]] == ["user", "assistant"]
    page = httpx.get(f"{second}/c/{conversation_id}/", headers={"Cookie": client.cookie})
    assert page.status_code == 200 and LEAVE_QUESTION in page.text

    with socket_to(second, client, conversation_id) as socket:
        # Idle for longer than the channel layer's blocking pop (5 s): the socket stays open.
        time.sleep(7)
        ask(socket, FOLLOW_UP)
        fragments = "".join(until(socket, IDLE))
    assert "five days" in fragments and "data-notice" not in fragments
    messages = Message.objects.filter(conversation_id=conversation_id).order_by("created_at")
    assert [(m.role, m.status) for m in messages] == [
        ("user", "complete"),
        ("assistant", "complete"),
        ("user", "complete"),
        ("assistant", "complete"),
    ]


def test_a_stop_on_one_process_stops_the_answer_running_on_the_other(servers):
    first, second = servers
    document_create(title="Staff handbook", texts=LEAVE_TEXTS, pages=[3, 4])
    owner, reader = clients_create(2)
    conversation_id = str(uuid.uuid4())
    with socket_to(first, owner, conversation_id) as running:
        question_id = ask(running, LEAVE_QUESTION)
        until(running, DELTA)  # the answer streams on the first process
        # Another staff user reading the (shared) conversation on the second process cannot
        # stop it: the answer goes on.
        with socket_to(second, reader, conversation_id) as readers:
            readers.send(json.dumps({"action": "stop"}))
            assert IDLE in readers.recv(timeout=30)
            assert DELTA in "".join(until(running, DELTA))
        # The owner's second tab, served by the second process, stops it.
        with socket_to(second, owner, conversation_id) as second_tab:
            second_tab.send(json.dumps({"action": "stop"}))
            assert IDLE in second_tab.recv(timeout=30)
            fragments = until(running, IDLE)
    final = "".join(fragments)
    assert 'data-status="interrupted"' in final and "Stopped" in final
    answer = Message.objects.get(reply_to_id=question_id)
    assert answer.status == Message.Status.INTERRUPTED and answer.content


def test_the_rate_limit_counts_one_users_requests_across_both_processes_exactly(servers):
    (client,) = clients_create(1)
    extra = 8
    urls = [servers[i % 2] for i in range(RATE + extra)]  # split evenly over both

    async def search(http: httpx.AsyncClient, url: str) -> int:
        response = await http.get(f"{url}/api/search", params={"q": "annual leave"})
        return response.status_code

    async def all_at_once() -> list[int]:
        headers = {"Authorization": f"Token {client.token}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as http:
            return await asyncio.gather(*(search(http, url) for url in urls))

    statuses = asyncio.run(all_at_once())
    assert sorted(statuses) == [200] * RATE + [429] * extra
    by_server = {url: sorted(s for u, s in zip(urls, statuses, strict=True) if u == url)
                 for url in servers}  # fmt: skip
    assert all(200 in s for s in by_server.values())  # both processes admitted some


def test_the_flood_rule_counts_one_users_questions_across_both_processes(servers):
    (client,) = clients_create(1)
    headers = {"Authorization": f"Token {client.token}"}

    def question(url: str) -> int:
        body = {"message": "What is the boiling point of tin?", "message_id": str(uuid.uuid4())}
        return httpx.post(f"{url}/api/chat", json=body, headers=headers, timeout=60).status_code

    # Five questions in a row, alternating between the processes, well under 2 s apart on
    # average: the fifth is a flood, though neither process saw more than three.
    with ThreadPoolExecutor(max_workers=1) as pool:
        statuses = list(pool.map(question, [servers[i % 2] for i in range(5)]))
    assert statuses == [200, 200, 200, 200, 429]
    assert not Conversation.objects.filter(messages__status="streaming").exists()
