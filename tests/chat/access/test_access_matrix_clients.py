"""The read rule on the OpenAI-compatible API and the MCP server (real server, raw bodies and
frames): an "HR only" collection readable by the HR group × {reader by group, staff who may
not read it, non-staff member of the group} × {/v1/chat/completions streamed and not, MCP
`search`, `ask` and the document resource}. The reader gets the pay bands; other staff get
what they would get if the collection did not exist (the refusal, "Unknown document"), and the
restricted text is in no raw body or frame they receive; non-staff get 403. A personal file is
searched only for its owner, through `file_ids`."""

from __future__ import annotations

import uuid

import httpx
import pytest
from django.contrib.auth.models import Group

from accounts.services import api_token_create
from chat.answering.evidence import NO_EVIDENCE_MESSAGE
from knowledge.collections import collection_create
from tests.support.knowledge_base import EXPENSES_TEXTS, LEAVE_TEXTS, document_create
from tests.support.personal import personal_file_create

pytestmark = pytest.mark.django_db(transaction=True)

PAY_BANDS = [
    "Grade 7 analysts are paid within the salary band of 41,200 to 48,900 pounds a year, "
    "reviewed every April by the Quarrington pay committee.",
    "Grade 8 senior analysts are paid within the salary band of 50,300 to 58,700 pounds a year.",
]
PAY_TITLE = "Pay bands 2026"
QUESTION = "What is the salary band for a Grade 7 analyst?"
SECRETS = ("48,900", "58,700", "Quarrington", PAY_TITLE)
OFFER = ["The offer letter grants Zephyrine Okafor a signing bonus of 7,350 pounds."]
OFFER_QUESTION = "What signing bonus does the offer letter grant?"


@pytest.fixture
def people(django_user_model):
    hr = Group.objects.create(name="HR")
    reader = django_user_model.objects.create_user("hr-member", password="x", is_staff=True)
    reader.groups.add(hr)
    staff = django_user_model.objects.create_user("plain-staff", password="x", is_staff=True)
    visitor = django_user_model.objects.create_user("visitor", password="x")  # not staff
    visitor.groups.add(hr)
    users = {"reader": reader, "staff": staff, "non-staff": visitor}
    keys = {role: api_token_create(user=user, name="matrix")[1] for role, user in users.items()}
    return {"hr": hr, "users": users, "keys": keys}


@pytest.fixture
def knowledge(people):
    collection = collection_create(name="HR only", groups=[people["hr"]])
    document_create(title="Staff handbook", texts=LEAVE_TEXTS)
    document_create(title="Expenses policy", texts=EXPENSES_TEXTS)
    pay = document_create(title=PAY_TITLE, texts=PAY_BANDS, collection=collection)
    return {"pay": pay}


def assert_no_secret(body: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in body, (where, secret)


def completion(url: str, key: str, question: str, **extra) -> httpx.Response:
    body = {"model": "sourced", "messages": [{"role": "user", "content": question}], **extra}
    return httpx.post(
        f"{url}/v1/chat/completions",
        json=body,
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )


def mcp_call(url: str, key: str, method: str, params: dict) -> httpx.Response:
    """One JSON-RPC request to /mcp/ as its raw HTTP exchange (stateless: no session)."""
    return httpx.post(
        f"{url}/mcp/",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={
            "Authorization": f"Bearer {key}",
            "Accept": "application/json, text/event-stream",
        },
        timeout=60,
    )


def test_openai_api_answers_the_restricted_question_only_for_its_readers(
    people, knowledge, live_server_url
):
    for role, key in people["keys"].items():
        for stream in (False, True):
            response = completion(live_server_url, key, QUESTION, stream=stream)
            body = response.text
            where = f"{role} stream={stream}"
            if role == "non-staff":
                assert response.status_code == 403, where
                assert response.json()["error"]["type"] == "permission_error"
                assert_no_secret(body, where)
                continue
            assert response.status_code == 200, where
            if role == "reader":
                assert "48,900" in body and PAY_TITLE in body, where
                assert f"/documents/{knowledge['pay'].pk}/" in body, where
            else:
                assert NO_EVIDENCE_MESSAGE in body and '"outcome": "refused"' in body, where
                assert_no_secret(body, where)


def test_mcp_search_ask_and_resource_follow_the_read_rule(people, knowledge, live_server_url):
    pay = knowledge["pay"]
    calls = {
        "search": ("tools/call", {"name": "search", "arguments": {"query": QUESTION, "limit": 20}}),
        "search HR": (
            "tools/call",
            {"name": "search", "arguments": {"query": QUESTION, "collection": "HR only"}},
        ),
        "ask": ("tools/call", {"name": "ask", "arguments": {"question": QUESTION}}),
        "resource": ("resources/read", {"uri": f"sourced://documents/{pay.pk}"}),
    }
    for role, key in people["keys"].items():
        for name, (method, params) in calls.items():
            response = mcp_call(live_server_url, key, method, params)
            body, where = response.text, f"{role} {name}"
            if role == "non-staff":
                assert response.status_code == 403, where
                assert_no_secret(body, where)
                continue
            assert response.status_code == 200, where
            if role == "reader":
                assert "48,900" in body, where
                continue
            assert_no_secret(body, where)
            reply = response.json()
            if name == "search":
                documents = {
                    r["document_id"] for r in reply["result"]["structuredContent"]["results"]
                }
                assert pay.pk not in documents and documents, where
            elif name == "search HR":  # the collection is unknown to them, like a missing one
                assert reply["result"]["isError"], where
                assert "Unknown collection" in body, where
            elif name == "ask":
                assert reply["result"]["structuredContent"]["outcome"] == "refused", where
            else:
                assert reply["error"]["message"] == f"Unknown document: {pay.pk}.", where


def test_a_personal_file_answers_only_its_owner(people, knowledge, live_server_url):
    offer = personal_file_create(people["users"]["reader"], title="offer.pdf", texts=OFFER)

    answered = completion(
        live_server_url, people["keys"]["reader"], OFFER_QUESTION, file_ids=[offer.pk]
    )
    assert answered.status_code == 200
    assert "7,350" in answered.text
    assert answered.json()["sourced"]["citations"][0]["document_id"] == offer.pk

    refused = completion(
        live_server_url,
        people["keys"]["staff"],
        OFFER_QUESTION,
        file_ids=[offer.pk],
        metadata={"conversation_id": str(uuid.uuid4())},
    )
    assert refused.status_code == 404
    assert refused.json()["error"]["param"] == "file_ids"
    assert "7,350" not in refused.text and "Zephyrine" not in refused.text
    # Not searched without file_ids, not by anyone's search, not readable as a resource.
    for role in ("reader", "staff"):
        key = people["keys"][role]
        plain = completion(live_server_url, key, OFFER_QUESTION)
        assert "7,350" not in plain.text, role
        searched = mcp_call(
            live_server_url,
            key,
            "tools/call",
            {"name": "search", "arguments": {"query": OFFER_QUESTION}},
        )
        assert "7,350" not in searched.text, role
    resource = mcp_call(
        live_server_url,
        people["keys"]["staff"],
        "resources/read",
        {"uri": f"sourced://documents/{offer.pk}"},
    )
    assert "7,350" not in resource.text and "Unknown document" in resource.text
    own = mcp_call(
        live_server_url,
        people["keys"]["reader"],
        "resources/read",
        {"uri": f"sourced://documents/{offer.pk}"},
    )
    assert "7,350" in own.text
