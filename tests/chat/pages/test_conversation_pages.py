"""`GET /api/conversations` a page at a time (docs/decisions/0102-conversation-pages.md):
keyset cursors, a bounded page, the same visibility as before on every page, and a clear 422
for a cursor or a limit the server did not give or allow."""

from __future__ import annotations

import itertools
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from chat.history import PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX
from chat.models import Conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(staff_user) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


def conversations(owner, count: int, *, private: bool = False, prefix: str = "Chat"):
    """`count` conversations, the later ones newer; some share an `updated_at` (ties are
    broken by creation time, then id)."""
    base = timezone.now() - timedelta(days=1)
    made = Conversation.objects.bulk_create(
        Conversation(owner=owner, is_private=private, title=f"{prefix} {i}") for i in range(count)
    )
    for i, conversation in enumerate(made):
        stamp = base + timedelta(seconds=i // 3)  # three at a time share updated_at
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=stamp, created_at=stamp)
    return made


def all_pages(api, **params) -> list[dict]:
    pages, cursor = [], None
    while True:
        query = {**params, **({"cursor": cursor} if cursor else {})}
        response = api.get("/api/conversations", query)
        assert response.status_code == 200, response.content
        pages.append(response.json())
        cursor = pages[-1]["next_cursor"]
        if cursor is None:
            return pages


def test_the_list_is_paged_and_every_conversation_comes_once_newest_first(
    api, staff_user, other_staff_user
):
    conversations(other_staff_user, 25, prefix="Shared")
    conversations(staff_user, 8, private=True, prefix="Mine")
    conversations(other_staff_user, 5, private=True, prefix="Theirs")

    pages = all_pages(api, limit=7)

    assert len(pages) == 5  # 33 visible, 7 a page
    assert all(len(p["shared"]) + len(p["private"]) <= 7 for p in pages)
    seen = [c for p in pages for c in p["shared"] + p["private"]]
    assert len(seen) == len({c["id"] for c in seen}) == 33
    assert not any(c["title"].startswith("Theirs") for c in seen)
    # Newest first across pages: nothing on a page is newer than anything on the page before.
    stamps = [sorted(c["updated_at"] for c in p["shared"] + p["private"]) for p in pages]
    assert all(earlier[0] >= later[-1] for earlier, later in itertools.pairwise(stamps))


def test_the_first_page_is_bounded_by_default(api, other_staff_user):
    conversations(other_staff_user, PAGE_SIZE_DEFAULT + 3)
    body = api.get("/api/conversations").json()
    assert len(body["shared"]) == PAGE_SIZE_DEFAULT
    assert body["next_cursor"]


def test_a_page_costs_one_query_whatever_its_depth(api, other_staff_user):
    conversations(other_staff_user, 40)
    cursor = api.get("/api/conversations", {"limit": 30}).json()["next_cursor"]
    with CaptureQueriesContext(connection) as queries:
        body = api.get("/api/conversations", {"limit": 30, "cursor": cursor}).json()
    assert len(body["shared"]) == 10 and body["next_cursor"] is None
    listing = [q["sql"] for q in queries if 'FROM "chat_conversation"' in q["sql"]]
    assert len(listing) == 1 and "LIMIT 31" in listing[0]


def test_the_title_search_pages_too(api, other_staff_user):
    conversations(other_staff_user, 12, prefix="Leave")
    conversations(other_staff_user, 12, prefix="Expenses")
    pages = all_pages(api, q="leave", limit=5)
    titles = [c["title"] for p in pages for c in p["shared"]]
    assert len(titles) == 12 and all(t.startswith("Leave") for t in titles)


@pytest.mark.parametrize(
    "params",
    [
        {"cursor": "not-a-cursor"},
        {"cursor": "WyJ4IiwgInkiLCAieiJd"},  # base64 of ["x", "y", "z"]
        {"limit": "0"},
        {"limit": ""},
        {"limit": str(PAGE_SIZE_MAX + 1)},
        {"limit": "²"},
    ],
)
def test_a_bad_cursor_or_limit_is_a_422_in_the_error_envelope(api, params):
    response = api.get("/api/conversations", params)
    assert response.status_code == 422, response.content
    body = response.json()
    assert body["error"]["code"] == "validation-failed"
    assert set(body["error"]["details"]) == set(params)


def test_the_schema_documents_the_cursor(api):
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/api/conversations"]["get"]
    names = {parameter["name"] for parameter in operation["parameters"]}
    assert {"cursor", "limit", "q"} <= names
    groups = schema["components"]["schemas"]["ConversationGroups"]
    assert "next_cursor" in groups["properties"]
