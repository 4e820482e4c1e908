"""Loading a long conversation, through the API and as the page: both read it as plain rows and
reuse what they rendered before, yet every load shows the current state — stale sources,
deleted documents, the reader's ratings, who may post."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.test import Client
from rest_framework.renderers import JSONRenderer

from chat.api.serializers import MessageListSerializer
from chat.models import Conversation, Feedback, Message
from chat.render_cache import RenderCache
from chat.selectors import conversation_messages
from chat.transcript import conversation_transcript, message_row
from knowledge.access import Reader
from knowledge.models import Chunk, Document
from tests.support.conversations import exchange_create
from tests.support.knowledge_base import basis, document_create

pytestmark = pytest.mark.django_db

STALE_NOTE = "The document has changed since this answer."
GONE_NOTE = "This document is no longer in the knowledge base."

# A reader of every document (a superuser's Reader): the rows as stored, nothing withheld
# (withheld rows: tests/chat/access/test_access_matrix_withheld.py).
EVERYTHING = Reader(user_id=None, is_superuser=True)


@pytest.fixture
def handbook(db) -> Document:
    texts = [
        "Full-time employees receive 25 days of paid annual leave per year.",
        "Up to five days of unused leave may be carried over.",
        "Sick leave must be reported before 10:00 on the first day.",
    ]
    return document_create(
        title="Staff handbook",
        texts=texts,
        pages=[3, 3, 4],
        sections=["Leave > Annual", "Leave > Carry-over", "Leave > Sick"],
        vectors=[basis(i) for i in range(len(texts))],
    )


@pytest.fixture
def expenses(db) -> Document:
    return document_create(
        title="Expenses policy",
        texts=["The daily meal allowance while travelling is 45 euros."],
        vectors=[basis(10)],
    )


@pytest.fixture
def conversation(staff_user, handbook, expenses) -> Conversation:
    """A shared conversation of three exchanges citing both documents, and a refusal."""
    chunks = list(handbook.chunks.order_by("index"))
    meal = expenses.chunks.get()
    conversation = Conversation.objects.create(owner=staff_user, title="Leave")
    exchange_create(
        conversation,
        question="What leave do I get?",
        answer="You get 25 days [1]. Five can be carried over [2].",
        cited=chunks[:2],
    )
    exchange_create(
        conversation,
        question="Sick leave and meals?",
        answer="Report before 10:00 [1]. Meals: 45 euros [2].",
        cited=[chunks[2], meal],
    )
    exchange_create(
        conversation,
        question="Who won in 1966?",
        answer="The documents don't say.",
        status=Message.Status.REFUSED,
        suggestions=["Rephrase the question", "Ask HR"],
    )
    return conversation


def client_of(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def expected_api_body(conversation: Conversation, user) -> bytes:
    """What DRF renders from the serializer over the model instances (the reference)."""
    body = {"conversation": conversation, "messages": conversation_messages(conversation)}
    request = SimpleNamespace(user=user)
    return JSONRenderer().render(MessageListSerializer(body, context={"request": request}).data)


def stale_flags(conversation: Conversation) -> list[bool]:
    return [
        c.stale
        for row in conversation_transcript(conversation, user=EVERYTHING)
        for c in row.citations
    ]


# --- Rows -----------------------------------------------------------------------------------
def test_transcript_rows_equal_the_stored_messages_and_tell_stale_sources_alike(
    conversation, handbook, expenses
):
    def assert_rows_match() -> None:
        rows = conversation_transcript(conversation, user=EVERYTHING)
        assert rows == [message_row(m) for m in conversation_messages(conversation)]

    assert_rows_match()
    assert stale_flags(conversation) == [False, False, False, False]

    # A cited chunk's text changes: only its citation is stale.
    Chunk.objects.filter(document=handbook, index=1).update(text="Carry-over is abolished.")
    assert_rows_match()
    assert stale_flags(conversation) == [False, True, False, False]

    # A document is disabled, then no longer ready: all its citations are stale.
    Document.objects.filter(pk=expenses.pk).update(enabled=False)
    assert_rows_match()
    assert stale_flags(conversation) == [False, True, False, True]
    Document.objects.filter(pk=expenses.pk).update(enabled=True, status=Document.Status.FAILED)
    assert stale_flags(conversation) == [False, True, False, True]

    # A document is deleted: its citations keep their snapshot and are stale.
    handbook.delete()
    assert_rows_match()
    assert stale_flags(conversation) == [True, True, True, True]
    rows = conversation_transcript(conversation, user=EVERYTHING)
    assert [c.document_title for c in rows[1].citations] == ["Staff handbook", "Staff handbook"]


def test_transcript_takes_two_queries_whatever_the_length(
    conversation, handbook, django_assert_num_queries
):
    chunks = list(handbook.chunks.order_by("index"))
    for i in range(20):
        exchange_create(conversation, question=f"Q{i}?", answer="A [1]. B [2].", cited=chunks[:2])
    with django_assert_num_queries(2):
        rows = conversation_transcript(conversation, user=EVERYTHING)
    assert len(rows) == 6 + 40


# --- API --------------------------------------------------------------------------------------
def test_api_messages_are_the_serializer_output_on_every_load(conversation, staff_user, handbook):
    client = client_of(staff_user)
    url = f"/api/conversations/{conversation.pk}/messages"
    first = client.get(url)
    assert first.status_code == 200 and first["Content-Type"] == "application/json"
    assert first.content == expected_api_body(conversation, staff_user)
    assert client.get(url).content == first.content  # reloaded (pieces reused): the same

    Chunk.objects.filter(document=handbook, index=0).update(text="Annual leave is 30 days.")
    changed = client.get(url)
    assert changed.content == expected_api_body(conversation, staff_user)
    citations = [c for m in changed.json()["messages"] for c in m["citations"]]
    assert [c["stale"] for c in citations] == [True, False, False, False]


def test_api_messages_in_another_format_are_the_same_data(conversation, staff_user):
    client = client_of(staff_user)
    url = f"/api/conversations/{conversation.pk}/messages"
    compact = client.get(url)
    indented = client.get(url, HTTP_ACCEPT="application/json; indent=2")
    assert indented.status_code == 200 and b'\n  "conversation"' in indented.content
    assert indented.json() == compact.json()


def test_api_is_owner_follows_the_reader(conversation, staff_user, other_staff_user):
    url = f"/api/conversations/{conversation.pk}/messages"
    assert client_of(staff_user).get(url).json()["conversation"]["is_owner"] is True
    other = client_of(other_staff_user).get(url)
    assert other.json()["conversation"]["is_owner"] is False
    assert other.content == expected_api_body(conversation, other_staff_user)


# --- Page -------------------------------------------------------------------------------------
def test_page_reload_shows_current_sources_ratings_and_permissions(
    conversation, staff_user, other_staff_user, handbook, expenses, django_user_model
):
    owner, reader = client_of(staff_user), client_of(other_staff_user)
    url = f"/c/{conversation.pk}/"
    answers = list(conversation.messages.filter(role="assistant").order_by("created_at"))

    def page(client: Client) -> str:
        response = client.get(url)
        assert response.status_code == 200
        return response.content.decode()

    first = page(owner)
    assert first.count("data-regenerate=") == 3 and STALE_NOTE not in first
    assert 'aria-pressed="true"' not in first
    assert "Rephrase the question" in first and 'data-rephrase="Who won in 1966?"' in first
    again = page(owner)  # from the rendered messages kept: the same page
    assert again == first.replace(csrf_token(first), csrf_token(again))

    # The same messages for a reader who may not post: no Regenerate; the owner's page keeps it.
    assert "data-regenerate=" not in page(reader)
    assert page(owner).count("data-regenerate=") == 3

    # A rating shows pressed for its author only.
    Feedback.objects.create(user=staff_user, message=answers[0], rating=Feedback.Rating.UP)
    assert page(owner).count('aria-pressed="true"') == 1
    assert 'aria-pressed="true"' not in page(reader)

    # A changed chunk, then a deleted document: the sources say so on the next load.
    Chunk.objects.filter(document=expenses).update(text="Meals are no longer paid.")
    changed = page(owner)
    assert changed.count(STALE_NOTE) == 1 and GONE_NOTE not in changed
    # A deleted document's answers are withheld from all but superusers
    # (docs/decisions/0080-withheld-answers.md), who see its citations as gone.
    handbook.delete()
    root = django_user_model.objects.create_superuser(username="root", email="", password=None)
    gone = page(client_of(root))
    assert gone.count(GONE_NOTE) == 3 and gone.count(STALE_NOTE) == 1
    assert f"/documents/{handbook.pk}/" not in gone
    withheld = page(owner)
    assert withheld.count('data-withheld="withdrawn"') == 2 and "25 days" not in withheld


def csrf_token(page: str) -> str:
    """The page's CSRF token (masked anew on every response)."""
    return page.split('"X-CSRFToken": "', 1)[1].split('"', 1)[0]


def test_settings_dialog_lists_the_documents_as_they_are_now(staff_user, handbook, expenses):
    client = client_of(staff_user)

    def listed() -> list[str]:  # what the dialog fetches when it opens
        page = client.get("/settings/documents/").content.decode()
        return [part.split('"', 1)[0] for part in page.split('data-document-title="')[1:]]

    assert listed() == ["Expenses policy", "Staff handbook"]
    assert listed() == ["Expenses policy", "Staff handbook"]
    Document.objects.filter(pk=expenses.pk).update(title="<b>Travel</b> policy")
    assert listed() == ["&lt;b&gt;Travel&lt;/b&gt; policy", "Staff handbook"]
    Document.objects.filter(pk=handbook.pk).update(enabled=False)
    assert listed() == ["&lt;b&gt;Travel&lt;/b&gt; policy"]


# --- The cache itself -------------------------------------------------------------------------
def test_render_cache_drops_the_least_recently_used_beyond_its_bound():
    cache = RenderCache(max_chars=10)
    cache.put("a", "A", 4)
    cache.put("b", "B", 4)
    assert cache.get("a") == "A"  # now the most recently used
    cache.put("c", "C", 4)
    assert cache.get("b") is None and cache.get("a") == "A" and cache.get("c") == "C"
    cache.put("huge", "H", 11)  # larger than the whole bound: never kept
    assert cache.get("huge") is None and len(cache) == 2
    cache.put("a", "A2", 2)  # replacing an entry frees its old size
    assert cache.get("a") == "A2" and cache.get("c") == "C"
