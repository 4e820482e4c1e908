"""`{% sidebar_item conversation %}`: one conversation of the sidebar's list
(`chat/layout.html#sidebar-item`), rendered once for each state it can show and kept in this
process (`chat.render_cache.RenderCache`, least recently used dropped first).

The list is rendered again for every question asked over the socket and for every page, and
each of its up to 60 items cost about a quarter of a millisecond of template rendering; between
two renders nearly all of them are unchanged (docs/decisions/0150-answer-cost-per-question.md,
"Fifth round"). The key holds every input of an item's HTML: the conversation's id, title and
last update, whether the reader owns it (its rename and delete buttons), whether it is the
page's conversation or the one whose rename button takes the focus, and the time zone, the
language and the URL prefix the rendering uses. Which conversations are listed is not decided
here: the list comes from the sidebar's query, for its reader."""

from __future__ import annotations

from typing import Any

from django import template
from django.template.loader import render_to_string
from django.urls import get_script_prefix
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import get_current_timezone_name
from django.utils.translation import get_language

from chat.render_cache import RenderCache

register = template.Library()

# At most this many characters of items (about a kilobyte each) in a process.
ITEMS_CACHE_CHARS = 2_000_000
_items = RenderCache(max_chars=ITEMS_CACHE_CHARS)


@register.simple_tag(takes_context=True)
def sidebar_item(context: template.Context, conversation: Any) -> SafeString:
    """The sidebar item of `conversation` for the context's `user`, `active_id` and
    `focus_id`, as `chat/layout.html#sidebar-item` renders it."""
    user = context.get("user")
    active_id = str(context.get("active_id") or "")
    focus_id = str(context.get("focus_id") or "")
    conversation_id = str(conversation.id)
    key = (
        conversation_id,
        conversation.title,
        conversation.updated_at,
        conversation.owner_id == getattr(user, "pk", None),
        conversation_id == active_id,
        conversation_id == focus_id,
        get_current_timezone_name(),
        get_language(),
        get_script_prefix(),
    )
    html = _items.get(key)
    if html is None:
        html = render_to_string(
            "chat/layout.html#sidebar-item",
            {
                "conversation": conversation,
                "user": user,
                "active_id": active_id,
                "focus_id": focus_id,
            },
        )
        _items.put(key, html, len(html) + len(conversation.title))
    return mark_safe(html)  # noqa: S308 (rendered by the template, its text escaped there)


def sidebar_items_forget() -> None:
    """Drop every kept item (tests)."""
    _items.clear()
