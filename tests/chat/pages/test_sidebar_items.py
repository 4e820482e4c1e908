"""The sidebar's items are rendered once per state and kept (chat/templatetags/chat_sidebar.py):
a kept item is exactly what rendering it now gives, for whoever reads and wherever they are,
and an unchanged list renders none of its items again."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.template.loader import render_to_string
from django.utils import timezone

from chat import fragments
from chat.models import Conversation
from chat.templatetags import chat_sidebar

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _nothing_kept():
    chat_sidebar.sidebar_items_forget()
    yield
    chat_sidebar.sidebar_items_forget()


@pytest.fixture
def renders(monkeypatch):
    """The item renders the tag makes (the real ones, counted)."""
    made: list[str] = []
    real = chat_sidebar.render_to_string

    def counted(name, context):
        made.append(str(context["conversation"].id))
        return real(name, context)

    monkeypatch.setattr(chat_sidebar, "render_to_string", counted)
    return made


def item_of(html: str, conversation: Conversation) -> str:
    match = re.search(rf'<li id="sidebar-{conversation.pk}".*?</li>', html, re.S)
    assert match, conversation.title
    return match.group(0)


def rendered_now(conversation: Conversation, user, *, active_id: str = "") -> str:
    """The item as the template renders it, nothing kept."""
    context = {"conversation": conversation, "user": user, "active_id": active_id}
    return render_to_string("chat/layout.html#sidebar-item", {**context, "focus_id": ""}).strip()


def test_an_unchanged_list_renders_no_item_again(staff_user, renders):
    for number in range(30):
        Conversation.objects.create(owner=staff_user, title=f"Conversation {number}")
    first = fragments.conversation_list_html(staff_user)
    assert len(renders) == 30

    second = fragments.conversation_list_html(staff_user)
    assert second == first
    assert len(renders) == 30  # every item kept

    moved = Conversation.objects.order_by("created_at").first()
    Conversation.objects.filter(pk=moved.pk).update(updated_at=timezone.now() + timedelta(1))
    third = fragments.conversation_list_html(staff_user, active_id=str(moved.pk))
    assert renders[30:] == [str(moved.pk)]  # the one that changed, and only it
    assert third.index(f'id="sidebar-{moved.pk}"') < third.index("Conversation 29")


def test_a_kept_item_is_what_rendering_it_now_gives(staff_user, other_staff_user, renders):
    mine = Conversation.objects.create(owner=staff_user, title="Leave <b>policy</b>")
    theirs = Conversation.objects.create(owner=other_staff_user, title="Travel")
    for _ in range(2):  # rendered, then kept
        html = fragments.conversation_list_html(staff_user, active_id=str(mine.pk))
        assert item_of(html, mine) == rendered_now(mine, staff_user, active_id=str(mine.pk))
        assert item_of(html, theirs) == rendered_now(theirs, staff_user, active_id=str(mine.pk))
    assert "Leave &lt;b&gt;policy&lt;/b&gt;" in item_of(html, mine)
    assert "Rename conversation" in item_of(html, mine)
    assert "Rename conversation" not in item_of(html, theirs)  # not the reader's own

    # The other reader: their own conversation has the buttons, this one not; neither active.
    html = fragments.conversation_list_html(other_staff_user)
    assert item_of(html, theirs) == rendered_now(theirs, other_staff_user)
    assert "Rename conversation" in item_of(html, theirs)
    assert "Rename conversation" not in item_of(html, mine)
    assert 'aria-current="page"' not in html

    # A new title and another active conversation are new items, never the kept ones.
    Conversation.objects.filter(pk=mine.pk).update(title="Leave, renamed")
    mine.refresh_from_db()
    html = fragments.conversation_list_html(staff_user, active_id=str(theirs.pk))
    assert item_of(html, mine) == rendered_now(mine, staff_user, active_id=str(theirs.pk))
    assert "Leave, renamed" in item_of(html, mine) and "policy" not in html
    assert 'aria-current="page"' in item_of(html, theirs)


def test_a_kept_item_follows_the_time_zone(staff_user):
    conversation = Conversation.objects.create(owner=staff_user, title="Leave")
    Conversation.objects.filter(pk=conversation.pk).update(
        updated_at=datetime(2026, 1, 5, 23, 30, tzinfo=UTC)
    )
    with timezone.override("UTC"):
        in_utc = fragments.conversation_list_html(staff_user)
    with timezone.override("Asia/Tokyo"):
        in_tokyo = fragments.conversation_list_html(staff_user)
    assert "2026-01-05 23:30" in in_utc
    assert "2026-01-06 08:30" in in_tokyo
