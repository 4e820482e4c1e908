"""The JSON API: authentication, visibility, conversations, messages, feedback, documents,
search, the error envelope, the rate limit and the OpenAPI docs."""

from __future__ import annotations

import io
import json
import re
import time
import uuid

import numpy as np
import pytest
from django.core.management import call_command
from django.test import AsyncClient, Client
from rest_framework.authtoken.models import Token

import chat.ratelimit
from chat.models import Conversation, Feedback, Message
from chat.ratelimit import Throttled, chat_rate_limited, throttled_message
from tests.support.answers import assert_answer_is_grounded, collect
from tests.support.knowledge_base import chunks_replace

LEAVE_QUESTION = "How many days of annual leave do full-time employees get?"


def assert_envelope(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message", "details"}
    assert body["error"]["code"] == code and body["error"]["message"]
    return body["error"]


@pytest.fixture
def api(staff_user) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


@pytest.fixture
def other_api(other_staff_user) -> Client:
    client = Client()
    client.force_login(other_staff_user)
    return client


def conversation_of(owner, *, private: bool, title: str = "A chat") -> Conversation:
    conversation = Conversation.objects.create(owner=owner, is_private=private, title=title)
    Message.objects.create(conversation=conversation, role="user", content=title)
    return conversation


# --- Authentication ------------------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/conversations", "/api/documents", "/api/search?q=leave"])
def test_anonymous_requests_get_401_in_the_envelope(client, path):
    response = client.get(path)
    assert_envelope(response, 401, "unauthorized")
    assert response["WWW-Authenticate"].startswith("Token")


@pytest.mark.django_db(transaction=True)
async def test_anonymous_chat_request_gets_401(db):
    response = await AsyncClient().post(
        "/api/chat", {"message": "Hi", "message_id": str(uuid.uuid4())}, "application/json"
    )
    assert_envelope(response, 401, "unauthorized")
    assert "WWW-Authenticate" in response


@pytest.mark.django_db
def test_non_staff_users_get_403(client, django_user_model):
    user = django_user_model.objects.create_user(username="visitor", password="pw-12345678")
    client.force_login(user)
    assert_envelope(client.get("/api/conversations"), 403, "forbidden")


@pytest.mark.django_db
def test_api_token_create_gives_a_working_token_also_as_bearer(staff_user, client):
    out = io.StringIO()
    call_command("api_token_create", staff_user.username, stdout=out, stderr=io.StringIO())
    key = out.getvalue().strip()
    for header in (f"Token {key}", f"Bearer {key}"):
        assert client.get("/api/conversations", HTTP_AUTHORIZATION=header).status_code == 200
    response = client.get("/api/conversations", HTTP_AUTHORIZATION="Token wrong")
    assert_envelope(response, 401, "unauthorized")


# --- Conversations -------------------------------------------------------------------------------
@pytest.mark.django_db
def test_conversation_list_groups_shared_and_own_private_newest_first(
    api, staff_user, other_staff_user
):
    old_shared = conversation_of(staff_user, private=False, title="Old shared")
    others_shared = conversation_of(other_staff_user, private=False, title="Their shared")
    mine_private = conversation_of(staff_user, private=True, title="My private")
    conversation_of(other_staff_user, private=True, title="Their private")

    body = api.get("/api/conversations").json()
    assert [c["title"] for c in body["shared"]] == ["Their shared", "Old shared"]
    assert [c["title"] for c in body["private"]] == ["My private"]
    first = body["shared"][0]
    assert first["id"] == str(others_shared.pk) and first["is_owner"] is False
    assert first["owner"]["username"] == "other"
    assert body["private"][0]["id"] == str(mine_private.pk)
    assert str(old_shared.pk) in {c["id"] for c in body["shared"]}
    searched = api.get("/api/conversations?q=old").json()
    assert [c["title"] for c in searched["shared"]] == ["Old shared"]


@pytest.mark.django_db
def test_someone_elses_private_conversation_is_forbidden_and_absent(
    api, other_staff_user, staff_user
):
    theirs = conversation_of(other_staff_user, private=True, title="Their private")
    assert_envelope(api.get(f"/api/conversations/{theirs.pk}"), 403, "forbidden")
    assert_envelope(api.get(f"/api/conversations/{theirs.pk}/messages"), 403, "forbidden")
    body = api.get("/api/conversations").json()
    assert str(theirs.pk) not in {c["id"] for c in body["shared"] + body["private"]}


@pytest.mark.django_db
def test_unknown_conversation_is_404_and_a_malformed_id_400(api):
    assert_envelope(api.get(f"/api/conversations/{uuid.uuid4()}"), 404, "not-found")
    error = assert_envelope(api.get("/api/conversations/not-a-uuid"), 400, "bad-request")
    assert "conversation_id" in error["details"]
    assert_envelope(api.get("/api/conversations/12345/messages"), 400, "bad-request")


@pytest.mark.django_db
def test_only_the_owner_renames_or_deletes(api, other_api, staff_user):
    mine = conversation_of(staff_user, private=False, title="Mine")
    url = f"/api/conversations/{mine.pk}"

    assert_envelope(
        other_api.patch(url, {"title": "Hijacked"}, content_type="application/json"),
        403,
        "forbidden",
    )
    assert_envelope(other_api.delete(url), 403, "forbidden")
    error = assert_envelope(
        api.patch(url, {"title": "  \x00 "}, content_type="application/json"),
        422,
        "validation-failed",
    )
    assert "title" in error["details"]

    response = api.patch(url, {"title": "  Renamed\tchat "}, content_type="application/json")
    assert response.status_code == 200 and response.json()["title"] == "Renamed chat"
    assert api.delete(url).status_code == 204
    assert_envelope(api.get(url), 404, "not-found")


@pytest.mark.django_db
def test_validation_errors_are_422_with_details_per_field(api, staff_user):
    mine = conversation_of(staff_user, private=False)
    error = assert_envelope(
        api.patch(f"/api/conversations/{mine.pk}", {}, content_type="application/json"),
        422,
        "validation-failed",
    )
    assert error["details"] == {"title": ["This field is required."]}


@pytest.mark.django_db
def test_unknown_api_path_and_wrong_method_are_enveloped(api):
    assert_envelope(api.get("/api/nothing-here"), 404, "not-found")
    assert_envelope(Client().get("/api/nothing-here"), 404, "not-found")
    assert_envelope(api.post("/api/conversations"), 405, "method-not-allowed")
    assert_envelope(api.get("/api/chat"), 405, "method-not-allowed")


@pytest.mark.django_db
def test_a_crash_is_a_500_in_the_envelope(api, monkeypatch):
    from chat.api import views

    def boom(*args, **kwargs):
        raise RuntimeError("database on fire")

    monkeypatch.setattr(views, "documents_list", boom)
    api.raise_request_exception = False
    error = assert_envelope(api.get("/api/documents"), 500, "internal")
    assert "fire" not in error["message"]


# --- Messages and feedback -----------------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_messages_come_with_citations_identical_after_reingest_and_deletion(
    policies_kb, staff_user, django_user_model
):
    from asgiref.sync import async_to_sync

    events = async_to_sync(collect)(user=staff_user, question=LEAVE_QUESTION)
    streamed = next(e for e in events if e.type == "sources").data["citations"]
    conversation_id = events[0].data["conversation_id"]
    client = Client()
    client.force_login(staff_user)
    url = f"/api/conversations/{conversation_id}/messages"

    def answer_of(body):
        assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
        return body["messages"][1]

    answer = answer_of(client.get(url).json())
    assert answer["status"] == "complete" and answer["citations"] == streamed
    assert_answer_is_grounded(answer["content"], answer["citations"])

    chunks_replace(policies_kb["handbook"], texts=["Annual leave is now 30 days."])
    after = answer_of(client.get(url).json())["citations"]
    assert [{**c, "stale": False} for c in after] == streamed
    assert any(c["stale"] for c in after)

    # Deleted: the answer is withheld from all but superusers, who read its snapshot
    # (docs/decisions/0080-withheld-answers.md).
    policies_kb["handbook"].delete()
    withheld = answer_of(client.get(url).json())
    assert (withheld["withheld"], withheld["citations"]) == ("withdrawn", [])
    client.force_login(
        django_user_model.objects.create_superuser(username="root", email="", password=None)
    )
    after = answer_of(client.get(url).json())["citations"]
    assert [{**c, "stale": False} for c in after] == streamed


@pytest.mark.django_db
def test_messages_say_what_retrieval_searched_for(api, client, staff_user):
    conversation = conversation_of(staff_user, private=False, title="And in London?")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        content="The hotel cap in London is 180 pounds.",
        reply_to=conversation.messages.get(),
        search_query="hotel cap London",
    )
    url = f"/api/conversations/{conversation.pk}/messages"

    def searched() -> list[tuple[str, str]]:
        return [(m["role"], m["search_query"]) for m in api.get(url).json()["messages"]]

    assert searched() == [("user", ""), ("assistant", "hotel cap London")]
    Message.objects.filter(role="assistant").update(search_query="hotel <cap> London 2026")
    assert searched() == [("user", ""), ("assistant", "hotel <cap> London 2026")]  # not stale

    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    field = schema["components"]["schemas"]["Message"]["properties"]["search_query"]
    assert field["type"] == "string" and "retrieval searched for" in field["description"]


@pytest.mark.django_db
def test_feedback_on_an_answer_is_given_and_replaced(api, staff_user, other_staff_user):
    conversation = conversation_of(staff_user, private=False)
    question = conversation.messages.get()
    answer = Message.objects.create(
        conversation=conversation, role="assistant", content="25 days [1]", reply_to=question
    )
    url = f"/api/messages/{answer.pk}/feedback"
    response = api.post(url, {"rating": "up"}, content_type="application/json")
    assert response.status_code == 200 and response.json()["rating"] == "up"
    response = api.post(
        url, {"rating": "down", "comment": "Wrong year"}, content_type="application/json"
    )
    assert response.json() == {**response.json(), "rating": "down", "comment": "Wrong year"}
    assert Feedback.objects.get().rating == Feedback.Rating.DOWN

    assert_envelope(
        api.post(url, {"rating": "meh"}, content_type="application/json"), 422, "validation-failed"
    )
    assert_envelope(
        api.post(
            f"/api/messages/{question.pk}/feedback",
            {"rating": "up"},
            content_type="application/json",
        ),
        404,
        "not-found",
    )
    assert_envelope(
        api.post(f"/api/messages/{uuid.uuid4()}/feedback", {"rating": "up"}), 404, "not-found"
    )
    private = conversation_of(other_staff_user, private=True)
    theirs = private.messages.get()
    assert_envelope(
        api.post(f"/api/messages/{theirs.pk}/feedback", {"rating": "up"}), 403, "forbidden"
    )


# --- Knowledge -----------------------------------------------------------------------------------
@pytest.mark.django_db
def test_documents_are_listed_with_status_and_chunk_counts(api, policies_kb):
    documents = api.get("/api/documents").json()["documents"]
    handbook = next(d for d in documents if d["title"] == "Staff handbook")
    assert handbook["chunk_count"] == 2 and handbook["status"] == "ready" and handbook["enabled"]
    assert handbook["url"] == "https://intranet.example/handbook"


@pytest.mark.django_db
def test_search_returns_ranked_chunks(api, policies_kb):
    body = api.get("/api/search", {"q": "meal allowance", "mode": "hybrid", "top_k": 2}).json()
    assert body["mode"] == "hybrid" and len(body["results"]) == 2
    assert "45 euros" in body["results"][0]["text"]
    assert body["results"][0]["document_title"] == "Expenses policy"


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params",
    [{"q": "leave", "top_k": 0}, {"q": "leave", "top_k": 21}, {"q": "leave", "mode": "magic"}, {}],
)
def test_search_rejects_bad_parameters_with_422(api, params):
    assert_envelope(api.get("/api/search", params), 422, "validation-failed")


# --- POST /api/chat: JSON outcomes ---------------------------------------------------------------
def chat_body(**fields) -> dict:
    return {"message": LEAVE_QUESTION, "message_id": str(uuid.uuid4()), **fields}


@pytest.fixture
async def chat_client(staff_user):
    client = AsyncClient()
    await client.aforce_login(staff_user)
    return client


async def post_chat(client: AsyncClient, body, **extra):
    payload = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return await client.post("/api/chat", payload, "application/json", **extra)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ("{not json", 400, "bad-request", None),
        ("[1, 2]", 400, "bad-request", None),
        (chat_body(message_id="not-a-uuid"), 400, "bad-request", "message_id"),
        (chat_body(conversation_id="123"), 400, "bad-request", "conversation_id"),
        (chat_body(top_k=0), 422, "validation-failed", "top_k"),
        (chat_body(top_k=21), 422, "validation-failed", "top_k"),
        (chat_body(message="x" * 5000), 422, "validation-failed", "message"),
        (chat_body(message=" \x00 "), 422, "validation-failed", "message"),
        (chat_body(embedding=[0.1] * 10), 422, "validation-failed", "embedding"),
        ({"message": "Hi"}, 422, "validation-failed", "message_id"),
        (chat_body(regenerate=0), 422, "validation-failed", "regenerate"),
        (chat_body(is_private="true"), 422, "validation-failed", "is_private"),
        (chat_body(embedding=["0.5"] * 384), 422, "validation-failed", "embedding"),
        (chat_body(embedding=[0.0] * 384), 422, "validation-failed", "embedding"),
    ],
    ids=[
        "malformed-json",
        "not-an-object",
        "malformed-message-id",
        "malformed-conversation-id",
        "top-k-0",
        "top-k-21",
        "too-long",
        "empty",
        "short-embedding",
        "missing-id",
        "regenerate-not-a-boolean",
        "is-private-not-a-boolean",
        "embedding-of-strings",
        "embedding-all-zero",
    ],  # fmt: skip
)
async def test_chat_rejects_bad_input_before_answering(chat_client, body, status, code, field):
    response = await post_chat(chat_client, body)
    error = assert_envelope(response, status, code)
    if field:
        assert field in error["details"]
    assert await Message.objects.acount() == 0


@pytest.mark.django_db(transaction=True)
async def test_a_question_and_its_options_are_checked_by_the_core_in_the_socket_s_words(
    chat_client,
):
    """The API checks the shape of its input; the answering core checks the question and the
    options, with the messages the WebSocket shows too (tests/chat/transports/test_consumer.py)."""
    response = await post_chat(chat_client, chat_body(top_k=21))
    error = assert_envelope(response, 422, "validation-failed")
    assert error["details"] == {"top_k": ["top_k must be a whole number from 1 to 20."]}
    response = await post_chat(chat_client, chat_body(message=" \t "))
    error = assert_envelope(response, 422, "validation-failed")
    assert error["details"] == {"message": ["The message is empty."]}
    response = await post_chat(chat_client, chat_body(message="x" * 5000))
    error = assert_envelope(response, 422, "validation-failed")
    assert error["message"].startswith("The message is too long: 5000 characters")
    assert await Message.objects.acount() == 0


@pytest.mark.django_db(transaction=True)
async def test_chat_refusal_is_plain_json_with_the_exact_text(chat_client, policies_kb):
    response = await post_chat(chat_client, chat_body(message="Who won the 1966 world cup?"))
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    body = response.json()
    assert body["type"] == "refusal"
    assert body["message"] == (
        "I don't have enough information to answer that question. "
        "You might try contacting support or rephrasing your question."
    )
    assert body["suggestions"] == ["Contact support", "Rephrase your question"]


@pytest.mark.django_db(transaction=True)
async def test_chat_on_someone_elses_conversation_is_forbidden(
    chat_client, policies_kb, other_staff_user
):
    theirs = await Conversation.objects.acreate(owner=other_staff_user, is_private=True, title="x")
    response = await post_chat(chat_client, chat_body(conversation_id=str(theirs.pk)))
    assert_envelope(response, 403, "forbidden")


@pytest.mark.django_db(transaction=True)
async def test_chat_with_a_session_needs_the_csrf_token(staff_user, policies_kb):
    client = AsyncClient(enforce_csrf_checks=True)
    await client.aforce_login(staff_user)
    error = assert_envelope(await post_chat(client, chat_body()), 403, "forbidden")
    assert "CSRF" in error["message"]


@pytest.mark.django_db(transaction=True)
async def test_chat_streams_server_sent_events_in_process(chat_client, policies_kb):
    response = await post_chat(chat_client, chat_body())
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/event-stream")
    assert response["Cache-Control"] == "no-cache" and response["X-Accel-Buffering"] == "no"
    body = b"".join([part async for part in response.streaming_content]).decode()
    frames = [frame for frame in body.split("\n\n") if frame]
    assert frames[0].startswith("event: answer_start\ndata: {")
    assert frames[-1].startswith("event: answer_end\ndata: {")


@pytest.mark.django_db(transaction=True)
async def test_21st_chat_request_in_a_minute_is_rate_limited_with_retry_after(
    chat_client, staff_user, other_staff_user, monkeypatch, settings
):
    from asgiref.sync import sync_to_async

    settings.CHAT_FLOOD_MIN_INTERVAL = 0  # the burst is a flood too: counted apart below
    # The limit counts in fixed one-minute windows read from the wall clock. A burst on a
    # loaded machine can outlast what is left of the current window and be counted in two (the
    # 21st request then starts a fresh count), so the clock is pinned to a window's first second.
    pinned = (int(time.time()) // 60) * 60 + 1.0
    monkeypatch.setattr(chat.ratelimit, "_now", lambda: pinned)
    for _ in range(20):  # the empty knowledge base refuses at once
        response = await post_chat(chat_client, chat_body())
        assert response.status_code == 200 and response.json()["type"] == "refusal"
    response = await post_chat(chat_client, chat_body())
    error = assert_envelope(response, 429, "rate-limited")
    assert 1 <= int(response["Retry-After"]) <= 60
    assert error["details"]["retry_after"] == int(response["Retry-After"])
    # Worded as the WebSocket words it.
    assert error["message"] == throttled_message(
        Throttled(retry_after=int(response["Retry-After"]))
    )
    # Per user: someone else is not affected, and the WebSocket consumer shares the counter.
    assert await sync_to_async(chat_rate_limited)(other_staff_user) is None
    assert await sync_to_async(chat_rate_limited)(staff_user) >= 1


@pytest.mark.django_db(transaction=True)
async def test_five_questions_in_a_few_seconds_get_a_friendly_429(chat_client, monkeypatch):
    now = [1000.0]  # a question every half second
    monkeypatch.setattr(chat.ratelimit, "_now", lambda: now[0])
    for _ in range(4):  # the empty knowledge base refuses at once
        response = await post_chat(chat_client, chat_body())
        assert response.status_code == 200 and response.json()["type"] == "refusal"
        now[0] += 0.5

    response = await post_chat(chat_client, chat_body())

    error = assert_envelope(response, 429, "rate-limited")
    assert error["message"] == throttled_message(Throttled(retry_after=7, flood=True))
    # Admitted again once the last five would be 2 s apart on average: at 1000.5 + 8 s.
    assert int(response["Retry-After"]) == 7 == error["details"]["retry_after"]


# --- OpenAPI -------------------------------------------------------------------------------------
@pytest.mark.django_db
def test_schema_documents_every_endpoint_the_sse_events_and_the_error_envelope(api):
    response = api.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    schema = json.loads(response.content)
    paths = schema["paths"]
    for path, method in [
        ("/api/chat", "post"),
        ("/api/conversations", "get"),
        ("/api/conversations/{conversation_id}", "get"),
        ("/api/conversations/{conversation_id}", "patch"),
        ("/api/conversations/{conversation_id}", "delete"),
        ("/api/conversations/{conversation_id}/messages", "get"),
        ("/api/messages/{message_id}/feedback", "post"),
        ("/api/documents", "get"),
        ("/api/search", "get"),
    ]:
        assert method in paths[path], (path, method)
    chat = paths["/api/chat"]["post"]
    assert "text/event-stream" in chat["responses"]["200"]["content"]
    for event in ("answer_start", "answer_delta", "sources", "answer_end", "refusal", "error"):
        assert event in chat["description"]
    for status in ("400", "401", "403", "409", "422", "429"):
        assert chat["responses"][status]["content"]["application/json"]["schema"]["$ref"].endswith(
            "ErrorEnvelope"
        )
    assert "ErrorEnvelope" in schema["components"]["schemas"]


@pytest.mark.django_db
def test_schema_says_what_the_server_checks(api):
    """What schemathesis found undocumented (tests/chat/api/test_api_contract.py runs it)."""
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    paths, components = schema["paths"], schema["components"]["schemas"]
    for path, method in [
        ("/api/conversations/{conversation_id}", "get"),
        ("/api/conversations/{conversation_id}", "patch"),
        ("/api/conversations/{conversation_id}", "delete"),
        ("/api/conversations/{conversation_id}/messages", "get"),
        ("/api/messages/{message_id}/feedback", "post"),
    ]:
        operation = paths[path][method]
        (id_parameter,) = [p for p in operation["parameters"] if p["in"] == "path"]
        assert id_parameter["schema"] == {"type": "string", "format": "uuid"}
        assert "400" in operation["responses"] and "503" in operation["responses"]
        assert list(operation.get("requestBody", {}).get("content", ["application/json"])) == [
            "application/json"
        ]
    rename = paths["/api/conversations/{conversation_id}"]["patch"]["requestBody"]
    assert rename["required"] is True
    assert components["ConversationUpdateRequest"]["required"] == ["title"]
    feedback = paths["/api/messages/{message_id}/feedback"]["post"]
    assert "answers only" in feedback["responses"]["404"]["description"]
    embedding = components["ChatRequestRequest"]["properties"]["embedding"]
    assert embedding["minItems"] == embedding["maxItems"] == 384
    assert embedding["not"] == {"items": {"type": "number", "enum": [0]}}  # not all zero
    message = components["ChatRequestRequest"]["properties"]["message"]
    assert message["minLength"] == 1 and message["maxLength"] == 4000
    pattern = re.compile(message["pattern"])
    for text in ("A question?", "  é  ", "\u200b", "\ue000", "\U0001f642"):  # private use: text
        assert pattern.match(text), text
    for text in (" ", "\t\n", "\x01\x02", "a\x00b"):
        assert not pattern.match(text), text
    search = {p["name"]: p for p in paths["/api/search"]["get"]["parameters"]}
    assert search["q"]["schema"]["maxLength"] == 1000
    assert "Retry-After" in paths["/api/search"]["get"]["responses"]["429"]["headers"]


@pytest.mark.django_db
def test_strings_must_be_strings_and_bodies_json(api, staff_user):
    conversation = conversation_of(staff_user, private=False)
    url = f"/api/conversations/{conversation.pk}"
    assert_envelope(
        api.patch(url, {"title": 0}, content_type="application/json"), 422, "validation-failed"
    )
    assert_envelope(
        api.patch(url, "title=New", content_type="application/x-www-form-urlencoded"),
        415,
        "unsupported-media-type",
    )
    conversation.refresh_from_db()
    assert conversation.title == "A chat"
    answer = Message.objects.create(conversation=conversation, role="assistant", content="Yes.")
    feedback = f"/api/messages/{answer.pk}/feedback"
    body = {"rating": "up", "comment": 0}
    assert_envelope(
        api.post(feedback, body, content_type="application/json"), 422, "validation-failed"
    )
    assert_envelope(api.post(feedback, {"rating": "up"}), 415, "unsupported-media-type")
    assert not Feedback.objects.exists()


@pytest.mark.django_db
def test_search_query_longer_than_a_url_carries_is_refused(api, policies_kb):
    error = assert_envelope(api.get("/api/search", {"q": "leave " * 200}), 422, "validation-failed")
    assert "q" in error["details"]
    assert api.get("/api/search", {"q": "annual leave"}).status_code == 200


def test_an_embedding_of_huge_or_tiny_numbers_is_still_a_direction():
    from chat.answering.pipeline import _embedding_validate
    from chat.errors import AnswerError

    for scale in (1e200, 1e-200):
        vector = _embedding_validate([scale] * 192 + [0.0] * 192)
        assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5
        assert abs(float(vector[0]) - 1 / np.sqrt(192)) < 1e-5
    with pytest.raises(AnswerError):
        _embedding_validate([0.0] * 384)


@pytest.mark.django_db
def test_the_schema_and_the_docs_are_for_staff_only(api, django_user_model):
    """Like the API they describe: anonymous 401, signed in but not staff 403, staff 200,
    with a session or with a token."""
    member = Client()
    member.force_login(django_user_model.objects.create_user(username="member"))
    token = Token.objects.create(
        user=django_user_model.objects.create_user(username="robot", is_staff=True)
    )
    with_token = Client(HTTP_AUTHORIZATION=f"Token {token.key}")
    for url in ("/api/schema/", "/api/docs/", "/api/docs/?script="):
        assert_envelope(Client().get(url), 401, "unauthorized")
        assert_envelope(member.get(url), 403, "forbidden")
        assert api.get(url).status_code == 200, url
        assert with_token.get(url).status_code == 200, url


@pytest.mark.django_db
def test_docs_page_serves_its_assets_locally(api):
    response = api.get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    # The page's start-up script is served apart (no inline script: the CSP allows none).
    script = api.get("/api/docs/", {"script": ""}).content.decode()
    assert "swagger-ui" in html and "/api/docs/?script=" in html and "/api/schema/" in script
    # Every asset the page loads is this server's; the script names no other host. (Not a
    # search for "cdn": the script carries a random 64-character CSRF token, which holds
    # those three letters about once in 500 runs.)
    assets = re.findall(r'(?:src|href)="([^"]*)"', html)
    assert assets and all(url.startswith("/") and not url.startswith("//") for url in assets)
    for text in (html, script):
        assert "://" not in text and not re.search(r"[\"'`]//", text)
