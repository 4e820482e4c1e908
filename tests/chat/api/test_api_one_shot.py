"""`POST /api/chat` with `stream: false` (one JSON body), and `chunk_index` in the citations of
the `sources` event and of the API's messages."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import AsyncClient

from chat.models import Message
from knowledge.models import Chunk
from tests.support.answers import assert_answer_is_grounded

LEAVE_QUESTION = "How many days of annual leave do full-time employees get?"


@pytest.fixture
async def chat_client(staff_user):
    client = AsyncClient()
    await client.aforce_login(staff_user)
    return client


async def post_chat(client: AsyncClient, **fields):
    body = {"message": LEAVE_QUESTION, "message_id": str(uuid.uuid4()), **fields}
    return await client.post("/api/chat", json.dumps(body), "application/json")


def sse_events(body: str) -> list[tuple[str, dict]]:
    events = []
    for frame in filter(None, body.split("\n\n")):
        head, data = frame.split("\n", 1)
        events.append((head.removeprefix("event: "), json.loads(data.removeprefix("data: "))))
    return events


@pytest.mark.django_db(transaction=True)
async def test_stream_false_answers_with_one_json_body_holding_the_text_and_its_citations(
    chat_client, policies_kb
):
    response = await post_chat(chat_client, stream=False)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert body["type"] == "answer" and body["status"] == "complete"
    assert "25" in body["content"] and body["citations"]
    assert_answer_is_grounded(body["content"], body["citations"])
    assert body["evidence"] in ("strong", "weak")
    stored = await Message.objects.aget(pk=body["message_id"])
    assert (stored.content, stored.role, str(stored.conversation_id), str(stored.reply_to_id)) == (
        body["content"],
        "assistant",
        body["conversation_id"],
        body["reply_to"],
    )
    # the same citations as the conversation's messages give
    listed = await chat_client.get(f"/api/conversations/{body['conversation_id']}/messages")
    assert listed.json()["messages"][1]["citations"] == body["citations"]


@pytest.mark.django_db(transaction=True)
async def test_stream_false_gives_the_same_answer_as_the_stream_and_a_repeat_is_the_stored_one(
    chat_client, policies_kb
):
    streamed = await post_chat(chat_client)
    events = sse_events(b"".join([p async for p in streamed.streaming_content]).decode())
    text = "".join(data["text"] for kind, data in events if kind == "answer_delta")
    citations = next(data for kind, data in events if kind == "sources")["citations"]

    message_id = str(uuid.uuid4())
    one_shot = (await post_chat(chat_client, stream=False, message_id=message_id)).json()
    assert one_shot["content"] == text
    assert [c["chunk_id"] for c in one_shot["citations"]] == [c["chunk_id"] for c in citations]
    again = (await post_chat(chat_client, stream=False, message_id=message_id)).json()
    assert again == one_shot  # answered once, the repeat replays it
    assert await Message.objects.filter(role="assistant").acount() == 2


@pytest.mark.django_db(transaction=True)
async def test_stream_false_refusal_and_a_non_boolean_stream(chat_client, policies_kb):
    refused = await post_chat(chat_client, stream=False, message="Who won the 1966 world cup?")
    assert refused.status_code == 200 and refused.json()["type"] == "refusal"
    response = await post_chat(chat_client, stream="no")
    assert response.status_code == 422
    assert "stream" in response.json()["error"]["details"]


@pytest.mark.django_db(transaction=True)
async def test_citations_carry_the_cited_chunk_s_index_in_the_stream_and_the_messages(
    chat_client, policies_kb
):
    body = (await post_chat(chat_client, stream=False)).json()
    indexes = {
        chunk_id: index
        async for chunk_id, index in Chunk.objects.filter(
            pk__in=[c["chunk_id"] for c in body["citations"]]
        ).values_list("pk", "index")
    }
    assert indexes and [c["chunk_index"] for c in body["citations"]] == [
        indexes[c["chunk_id"]] for c in body["citations"]
    ]
    # carry-over is the handbook's second chunk: its index is 1, not a default 0
    carry = await post_chat(
        chat_client, stream=False, message="Can I carry over unused annual leave?"
    )
    cited = carry.json()["citations"]
    assert any(c["chunk_index"] == 1 for c in cited), cited


@pytest.mark.django_db
def test_schema_documents_chunk_index_stream_and_the_one_shot_answer(staff_user, client):
    client.force_login(staff_user)
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    components = schema["components"]["schemas"]
    assert "chunk_index" in components["Citation"]["properties"]
    assert components["ChatRequestRequest"]["properties"]["stream"]["type"] == "boolean"
    assert {"content", "citations", "message_id"} <= set(components["OneShotAnswer"]["properties"])
    json_200 = schema["paths"]["/api/chat"]["post"]["responses"]["200"]["content"]
    assert json_200["application/json"]["schema"] == {"$ref": "#/components/schemas/ChatJson"}
