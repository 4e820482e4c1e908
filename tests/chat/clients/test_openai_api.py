"""The OpenAI-compatible API (/v1) through the `openai` package against a real server (daphne in
a subprocess, the test database): models, streamed and non-streamed answers with their
citations, a refusal, a follow-up, the stored exchange, 401, 404, 422 and 429."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import openai
import pytest
from django.test import AsyncClient

from accounts.services import api_token_create
from chat.answering import evidence_signals
from chat.answering.evidence import (
    NO_EVIDENCE_MESSAGE,
    NO_EVIDENCE_SUGGESTIONS,
    WEAK_EVIDENCE_NOTICE,
)
from chat.models import Conversation, Message
from chat.ratelimit import chat_admit
from tests.support.knowledge_base import EXPENSES_TEXTS, document_create

pytestmark = pytest.mark.django_db(transaction=True)

TRAVEL_TEXTS = [
    "The nightly hotel cap is 180 euros in Lisbon and 240 euros in London. "
    "Hotels above the cap need the approval of a director. "
    "Book hotels through the travel desk at least two weeks ahead.",
    "Trains are the preferred way to travel between cities less than five hours apart. "
    "First class is allowed only for journeys longer than three hours.",
]
LISBON = "What is the nightly hotel cap in Lisbon?"
LONDON = "And in London?"
OFF_TOPIC = "What is the boiling point of liquid nitrogen on Neptune's moons?"


@pytest.fixture
def travel_kb(db):
    return {
        "travel": document_create(
            title="Travel policy",
            texts=TRAVEL_TEXTS,
            pages=[2, 3],
            sections=["Hotels", "Trains"],
        ),
        "expenses": document_create(title="Expenses policy", texts=EXPENSES_TEXTS),
    }


@pytest.fixture
def key(staff_user) -> str:
    return api_token_create(user=staff_user, name="openai tests")[1]


@pytest.fixture
def client(live_server_url, key) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{live_server_url}/v1", api_key=key, max_retries=0, timeout=60)


def test_models_lists_sourced(client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["sourced"]
    assert client.models.retrieve("sourced").owned_by == "sourced"


def test_non_streamed_answer_has_markers_a_sources_list_and_structured_citations(
    travel_kb, client, staff_user, live_server_url
):
    completion = client.chat.completions.create(
        model="sourced", messages=[{"role": "user", "content": LISBON}]
    )

    message = completion.choices[0].message
    assert completion.choices[0].finish_reason == "stop"
    assert "180 euros" in message.content and "[1]" in message.content
    answer, sources = message.content.split("\n\n**Sources**\n\n")
    document = travel_kb["travel"]
    link = f"{live_server_url}/documents/{document.pk}/?chunk="
    assert f"- \\[1\\] [Travel policy]({link}" in sources and "— Page 2 · Hotels" in sources
    extension = message.model_extra["sourced"]
    assert extension["outcome"] == "answered"
    citation = extension["citations"][0]
    assert citation["n"] == 1 and citation["document_id"] == document.pk
    assert citation["page"] == 2 and citation["section"] == "Hotels"
    assert citation["link"].startswith(link) and "180 euros" in citation["excerpt"]
    # Stored as an exchange of a private conversation of the token's user.
    conversation = Conversation.objects.get(pk=extension["conversation_id"])
    assert conversation.owner == staff_user and conversation.is_private
    stored = Message.objects.get(pk=extension["message_id"])
    assert stored.content == answer and stored.citations.count() == len(extension["citations"])


def test_streamed_answer_arrives_in_chunks_and_ends_with_the_sources(travel_kb, client):
    stream = client.chat.completions.create(
        model="sourced", messages=[{"role": "user", "content": LISBON}], stream=True
    )
    chunks = list(stream)

    assert chunks[0].choices[0].delta.role == "assistant"
    pieces = [c.choices[0].delta.content or "" for c in chunks]
    assert len([p for p in pieces if p]) >= 3
    content = "".join(pieces)
    assert "180 euros" in content and "[1]" in content and "**Sources**" in content
    assert content.index("**Sources**") > content.index("[1]")
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert [c.choices[0].finish_reason for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    extension = last.model_extra["sourced"]
    assert extension["outcome"] == "answered"
    assert extension["citations"][0]["document_id"] == travel_kb["travel"].pk
    assert all("sourced" not in c.model_extra for c in chunks[:-1])


def test_a_refusal_is_an_ordinary_assistant_message(travel_kb, client):
    completion = client.chat.completions.create(
        model="sourced", messages=[{"role": "user", "content": OFF_TOPIC}]
    )
    message = completion.choices[0].message
    assert message.role == "assistant" and message.refusal is None
    assert message.content.startswith(NO_EVIDENCE_MESSAGE)
    assert "**Sources**" not in message.content
    assert all(f"- {suggestion}" in message.content for suggestion in NO_EVIDENCE_SUGGESTIONS)
    assert message.model_extra["sourced"]["outcome"] == "refused"
    assert message.model_extra["sourced"]["citations"] == []

    chunks = list(
        client.chat.completions.create(
            model="sourced", messages=[{"role": "user", "content": OFF_TOPIC}], stream=True
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks).startswith(NO_EVIDENCE_MESSAGE)
    assert chunks[-1].model_extra["sourced"]["outcome"] == "refused"


def test_a_follow_up_continues_the_conversation_the_client_resends(travel_kb, client):
    first = client.chat.completions.create(
        model="sourced", messages=[{"role": "user", "content": LISBON}]
    )
    conversation_id = first.choices[0].message.model_extra["sourced"]["conversation_id"]

    # The client resends the whole conversation, naming none.
    follow_up = client.chat.completions.create(
        model="sourced",
        messages=[
            {"role": "user", "content": LISBON},
            {"role": "assistant", "content": first.choices[0].message.content},
            {"role": "user", "content": LONDON},
        ],
    )
    extension = follow_up.choices[0].message.model_extra["sourced"]
    assert "240 euros in London" in follow_up.choices[0].message.content
    assert extension["conversation_id"] == conversation_id
    assert extension["search_query"] != LONDON  # read in the conversation's context
    questions = Message.objects.filter(conversation_id=conversation_id, role=Message.Role.USER)
    assert list(questions.order_by("created_at").values_list("content", flat=True)) == [
        LISBON,
        LONDON,
    ]


def test_the_conversation_named_in_metadata_is_reused_and_the_header_returns_it(travel_kb, client):
    conversation_id = str(uuid.uuid4())
    raw = client.chat.completions.with_raw_response.create(
        model="sourced",
        messages=[{"role": "user", "content": LISBON}],
        metadata={"conversation_id": conversation_id},
    )
    assert raw.headers["X-Sourced-Conversation-Id"] == conversation_id
    follow_up = client.chat.completions.create(
        model="sourced",
        messages=[{"role": "user", "content": LONDON}],  # the history is the server's
        metadata={"conversation_id": conversation_id},
    )
    assert "240 euros in London" in follow_up.choices[0].message.content
    assert Message.objects.filter(conversation_id=conversation_id).count() == 4


def test_the_same_idempotency_key_replays_the_stored_answer(travel_kb, client):
    ask = {"model": "sourced", "messages": [{"role": "user", "content": LISBON}]}
    key = "retry-" + uuid.uuid4().hex
    first = client.chat.completions.create(**ask, extra_headers={"Idempotency-Key": key})
    again = client.chat.completions.create(**ask, extra_headers={"Idempotency-Key": key})
    assert again.choices[0].message.content == first.choices[0].message.content
    first_ids = first.choices[0].message.model_extra["sourced"]
    again_ids = again.choices[0].message.model_extra["sourced"]
    assert again_ids["message_id"] == first_ids["message_id"]
    assert Message.objects.filter(role=Message.Role.USER, content=LISBON).count() == 1


def test_a_bad_token_is_401_in_the_openai_error_shape(live_server_url):
    bad = openai.OpenAI(base_url=f"{live_server_url}/v1", api_key="not-a-token", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as raised:
        bad.models.list()
    assert raised.value.status_code == 401
    assert raised.value.body["type"] == "authentication_error"
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model="sourced", messages=[{"role": "user", "content": "x"}])


def test_an_unknown_model_is_404_and_bad_messages_422(client):
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert raised.value.body["code"] == "model_not_found"
    with pytest.raises(openai.UnprocessableEntityError) as raised:
        client.chat.completions.create(
            model="sourced", messages=[{"role": "assistant", "content": "hello"}]
        )
    assert raised.value.body["param"] == "messages"
    with pytest.raises(openai.UnprocessableEntityError):
        client.chat.completions.create(model="sourced", messages=[{"role": "user", "content": " "}])


def test_429_under_the_rate_limit_with_retry_after(travel_kb, client, staff_user, settings):
    from chat.ratelimit import rate_parse

    limit = rate_parse(settings.CHAT_RATE_LIMIT).limit
    if time.time() % 60 > 50:  # the window would end before the request: wait for the next
        time.sleep(61 - time.time() % 60)
    for _ in range(limit):
        chat_admit(staff_user)  # the server's store (the test database's table)
    with pytest.raises(openai.RateLimitError) as raised:
        client.chat.completions.create(
            model="sourced", messages=[{"role": "user", "content": LISBON}]
        )
    assert int(raised.value.response.headers["Retry-After"]) >= 1
    assert raised.value.body["type"] == "rate_limit_error"
    assert "faster than the limit allows" in raised.value.body["message"]
    assert not Message.objects.filter(content=LISBON).exists()  # nothing stored


def test_a_client_that_disconnects_leaves_the_answer_interrupted(travel_kb, key, live_server_url):
    body = {"model": "sourced", "stream": True, "messages": [{"role": "user", "content": LISBON}]}
    headers = {"Authorization": f"Bearer {key}"}
    with (
        httpx.Client() as http,
        http.stream(
            "POST", f"{live_server_url}/v1/chat/completions", json=body, headers=headers
        ) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if '"content": "' in line and '"content": ""' not in line:
                break
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        answer = Message.objects.filter(role=Message.Role.ASSISTANT).first()
        if answer is not None and answer.status != Message.Status.STREAMING:
            break
        time.sleep(0.2)
    assert answer.status == Message.Status.INTERRUPTED


def test_the_schema_documents_v1_and_the_sourced_field(admin_client):
    schema = admin_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    paths, components = schema["paths"], schema["components"]["schemas"]
    assert "get" in paths["/v1/models"] and "get" in paths["/v1/models/{model_id}"]
    completions = paths["/v1/chat/completions"]["post"]
    assert {"application/json", "text/event-stream"} <= set(
        completions["responses"]["200"]["content"]
    )
    for status in ("401", "404", "422", "429", "503"):
        schema_ref = completions["responses"][status]["content"]["application/json"]["schema"]
        assert schema_ref["$ref"].endswith("OpenAiError"), status
    assert "X-Sourced-Conversation-Id" in completions["description"]
    message = components["AssistantMessage"]["properties"]
    assert "#/components/schemas/SourcedExtension" in json.dumps(message["sourced"])
    citation = components["ClientCitation"]["properties"]
    assert {"n", "document_id", "title", "page", "section", "cells", "link"} <= set(citation)


@pytest.fixture
def band_everything(monkeypatch):
    """Every answer in the weak-support band (its upper edge above any log-odds)."""
    monkeypatch.setattr(evidence_signals, "WEAK_SUPPORT_SCORE", 1e9)


async def test_a_weak_answer_keeps_the_notice_in_its_text_and_says_so(
    travel_kb, key, band_everything
):
    client, headers = AsyncClient(), {"Authorization": f"Bearer {key}"}
    ask = {"model": "sourced", "messages": [{"role": "user", "content": LISBON}]}

    response = await client.post(
        "/v1/chat/completions", ask, content_type="application/json", headers=headers
    )
    message = response.json()["choices"][0]["message"]
    assert message["sourced"]["outcome"] == "weak_evidence"
    answer, sources = message["content"].split("\n\n**Sources**\n\n")
    assert answer.endswith(f"\n\n_{WEAK_EVIDENCE_NOTICE}_") and "180 euros" in answer

    streamed = await client.post(
        "/v1/chat/completions",
        {**ask, "stream": True},
        content_type="application/json",
        headers=headers,
    )
    body = b"".join([part async for part in streamed.streaming_content]).decode()
    frames = [json.loads(f.removeprefix("data: ")) for f in body.split("\n\n")[:-2] if f]
    assert body.endswith("data: [DONE]\n\n")
    text = "".join(f["choices"][0]["delta"].get("content", "") for f in frames)
    assert WEAK_EVIDENCE_NOTICE in text and text.index(WEAK_EVIDENCE_NOTICE) < text.index(
        "**Sources**"
    )
    assert frames[-1]["sourced"]["outcome"] == "weak_evidence"
