"""History search over message text is full-text through an index
(docs/decisions/0102-conversation-pages.md): no `icontains` scan of every message, words found
in any form, and the read rule kept (the withheld-answer matrix tests the rule itself)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from chat.history import conversations_search, snippet_around
from chat.models import Conversation
from tests.support.conversations import exchange_create

pytestmark = pytest.mark.django_db


def exchange(owner, title: str, question: str, answer: str, *, private: bool = False):
    conversation = Conversation.objects.create(owner=owner, title=title, is_private=private)
    exchange_create(conversation, question=question, answer=answer)
    return conversation


def test_message_text_is_searched_by_its_words_through_the_index(staff_user):
    exchange(staff_user, "Travel", "Taxis at night?", "Taxis are reimbursed after 22:00.")
    exchange(staff_user, "Leave", "How much leave?", "You get 25 days.")

    with CaptureQueriesContext(connection) as queries:
        found = list(conversations_search(user=staff_user, query="reimbursing taxi"))

    assert [c.title for c in found] == ["Travel"]
    sql = " ".join(q["sql"] for q in queries)
    assert "@@" in sql and "websearch_to_tsquery" in sql
    assert 'UPPER("chat_message"."content"' not in sql  # no substring scan of every message


def test_the_message_search_uses_the_gin_index(staff_user):
    exchange(staff_user, "Travel", "Taxis at night?", "Taxis are reimbursed after 22:00.")
    query = conversations_search(user=staff_user, query="reimbursed")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_indexscan = off")  # the GIN index serves a bitmap scan
        sql, params = query.query.sql_with_params()
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "message_content_fts" in plan


def test_titles_still_match_by_substring_and_private_chats_of_others_never(
    staff_user, other_staff_user
):
    exchange(staff_user, "Expenses question", "Taxis?", "Taxis are reimbursed.")
    exchange(other_staff_user, "Their expenses", "Taxis?", "Taxis are reimbursed.", private=True)
    assert [c.title for c in conversations_search(user=staff_user, query="XPENSE")] == [
        "Expenses question"
    ]
    assert [c.title for c in conversations_search(user=staff_user, query="reimbursed")] == [
        "Expenses question"
    ]


def test_the_history_page_shows_the_text_around_words_found_apart(staff_user):
    exchange(staff_user, "Travel", "Taxis?", "Taxis at night are reimbursed after 22:00.")
    client = Client()
    client.force_login(staff_user)
    page = client.get("/history/", {"q": "reimbursed taxis"}).content.decode()
    assert "data-history-item" in page
    assert "Taxis at night are reimbursed after 22:00." in page
    assert snippet_around("a b reimbursed c", "taxis reimbursed") == "a b reimbursed c"
