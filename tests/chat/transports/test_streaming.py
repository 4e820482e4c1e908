"""POST /api/chat against a real ASGI server (daphne in a subprocess), read incrementally
with httpx: what a client on the network sees."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import httpx
import pytest
from rest_framework.authtoken.models import Token

from chat.models import Conversation, Message
from tests.support.answers import assert_answer_is_grounded
from tests.support.clients import sse_events
from tests.support.live_server import LIVE_SERVER_DELAY_MS

pytestmark = pytest.mark.django_db(transaction=True)

LEAVE_QUESTION = "How many days of annual leave do full-time employees get?"
DEMO_DIR = Path(__file__).resolve().parents[3] / "demo"


@pytest.fixture
def token(staff_user) -> str:
    return Token.objects.create(user=staff_user).key


def chat_request(client: httpx.Client, url: str, token: str, **body):
    body = {"message": LEAVE_QUESTION, "message_id": str(uuid.uuid4()), **body}
    return client.stream(
        "POST",
        f"{url}/api/chat",
        json=body,
        headers={"Authorization": f"Token {token}", "Accept": "text/event-stream"},
        timeout=60,
    )


def answer_status(reply_to: str) -> tuple[str, str]:
    message = Message.objects.get(reply_to_id=reply_to, role=Message.Role.ASSISTANT)
    return message.status, message.content


def test_answer_streams_incrementally_in_order_with_citations_matching_markers(
    policies_kb, token, live_server_url
):
    with httpx.Client() as client, chat_request(client, live_server_url, token) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache"
        events, arrived = [], []
        for event, data in sse_events(response):
            events.append((event, data))
            arrived.append(time.monotonic())
            if event == "answer_delta" and len([e for e, _ in events if e == "answer_delta"]) == 1:
                # The first delta is here while the answer is still being produced.
                status, content = answer_status(events[0][1]["reply_to"])
                assert status == "streaming" and content == ""

    types = [event for event, _ in events]
    assert types[0] == "answer_start" and types[-2:] == ["sources", "answer_end"]
    deltas = [i for i, t in enumerate(types) if t == "answer_delta"]
    assert deltas == list(range(1, len(types) - 2)) and len(deltas) >= 3
    # Pieces arrive one by one, not in a single buffered burst at the end.
    assert (
        arrived[deltas[-1]] - arrived[deltas[0]] >= (len(deltas) - 1) * LIVE_SERVER_DELAY_MS / 2000
    )
    content = "".join(data["text"] for event, data in events if event == "answer_delta")
    citations = events[-2][1]["citations"]
    assert_answer_is_grounded(content, citations)
    assert "25 days of paid annual leave" in content
    assert events[-1][1]["status"] == "complete"
    assert answer_status(events[0][1]["reply_to"]) == ("complete", content)


def test_demo_knowledge_base_question_cites_the_right_document_and_page(
    staff_user, token, live_server_url
):
    from knowledge.services import documents_ingest

    outcomes = documents_ingest(paths=[DEMO_DIR], title=None, enabled=True, dry_run=False)
    assert outcomes and all(o.action == "new" for o in outcomes), outcomes
    question = "What mileage rate can I claim when I use my own car for a business journey?"
    with (
        httpx.Client() as client,
        chat_request(client, live_server_url, token, message=question) as response,
    ):
        events = list(sse_events(response))
    content = "".join(data["text"] for event, data in events if event == "answer_delta")
    citations = next(data for event, data in events if event == "sources")["citations"]
    assert_answer_is_grounded(content, citations)
    assert "45p per mile" in content
    first = citations[0]
    assert first["title"].startswith("Expenses") or "expenses" in first["title"].lower()
    assert first["page"] == 3


def test_unrelated_question_gets_the_refusal_json(policies_kb, token, live_server_url):
    with (
        httpx.Client() as client,
        chat_request(
            client, live_server_url, token, message="Who won the football world cup in 1966?"
        ) as response,
    ):
        response.read()
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["type"] == "refusal"
    assert body["message"] == (
        "I don't have enough information to answer that question. "
        "You might try contacting support or rephrasing your question."
    )
    assert body["suggestions"] == ["Contact support", "Rephrase your question"]


def test_empty_knowledge_base_refusal_over_http(token, live_server_url):
    with httpx.Client() as client, chat_request(client, live_server_url, token) as response:
        response.read()
    assert response.json()["message"] == "The knowledge base is empty. Please contact an admin."


def test_request_without_credentials_is_401(live_server_url):
    response = httpx.post(
        f"{live_server_url}/api/chat",
        json={"message": "Hi", "message_id": str(uuid.uuid4())},
        timeout=30,
    )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"


def test_client_disconnect_mid_stream_stores_the_partial_answer_as_interrupted(
    policies_kb, token, live_server_url
):
    received = []
    with httpx.Client() as client, chat_request(client, live_server_url, token) as response:
        for event, data in sse_events(response):
            received.append((event, data))
            if event == "answer_delta":
                break  # leaving the block closes the connection mid-stream
    reply_to = received[0][1]["reply_to"]
    deadline = time.monotonic() + 20
    while answer_status(reply_to)[0] == "streaming" and time.monotonic() < deadline:
        time.sleep(0.1)
    status, content = answer_status(reply_to)
    assert status == "interrupted"
    assert content.startswith(received[1][1]["text"])


def test_same_message_id_on_two_connections_at_once_is_answered_once(
    policies_kb, token, live_server_url
):
    message_id = str(uuid.uuid4())
    barrier = threading.Barrier(2)
    results: list[list] = []

    def ask():
        with httpx.Client() as client:
            barrier.wait()
            with chat_request(client, live_server_url, token, message_id=message_id) as response:
                results.append(list(sse_events(response)))

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert len(results) == 2
    contents = [
        "".join(data["text"] for event, data in events if event == "answer_delta")
        for events in results
    ]
    assert contents[0] == contents[1] and contents[0]
    sources = [next(d for e, d in events if e == "sources") for events in results]
    assert sources[0] == sources[1]
    assert Conversation.objects.count() == 1
    assert Message.objects.filter(role=Message.Role.USER).count() == 1
    assert Message.objects.filter(role=Message.Role.ASSISTANT).count() == 1


def test_same_message_id_sent_again_later_replays_the_stored_answer(
    policies_kb, token, live_server_url
):
    message_id = str(uuid.uuid4())
    replies = []
    for _ in range(2):
        with (
            httpx.Client() as client,
            chat_request(client, live_server_url, token, message_id=message_id) as response,
        ):
            replies.append(list(sse_events(response)))
    first, second = replies
    assert [e for e, _ in second] == ["answer_start", "answer_delta", "sources", "answer_end"]
    assert "".join(d["text"] for e, d in first if e == "answer_delta") == second[1][1]["text"]
    assert first[-2] == second[-2] and first[0] == second[0]
    assert Message.objects.count() == 2
