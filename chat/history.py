"""The history page's reads: conversations a user may see, searched by title and message text."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Exists, OuterRef, Q, QuerySet

from chat.models import Conversation, Message
from chat.selectors import conversations_visible_to, messages_withheld_filter
from knowledge.access import Reader, reader_for

SEARCH_MAX_CHARS = 200
SNIPPET_CHARS = 180


@dataclass(frozen=True)
class HistoryItem:
    conversation: Conversation
    snippet: str = ""


def conversations_search(
    *, user: AbstractBaseUser, reader: Reader | None = None, query: str = ""
) -> QuerySet[Conversation]:
    """Conversations `user` may see, newest first; with a query, those whose title or any
    message (question or answer) `user` may read contains it, case-insensitively. Someone
    else's private conversations are never included, whatever matches; an answer withheld from
    `user` (`chat.selectors.messages_withheld_filter`, in the same SQL) never matches.
    `reader`: `user`'s `Reader`, when the caller has computed it."""
    conversations = conversations_visible_to(user)
    query = query_clean(query)
    if query:
        matching_message = _messages_readable(reader or reader_for(user)).filter(
            conversation_id=OuterRef("pk"), content__icontains=query
        )
        conversations = conversations.filter(Q(title__icontains=query) | Exists(matching_message))
    return conversations


def query_clean(query: str) -> str:
    return " ".join((query or "").split())[:SEARCH_MAX_CHARS]


def _messages_readable(reader: Reader) -> QuerySet[Message]:
    """The messages whose text `reader` may read (none withheld from them), superseded answers
    left out (out of their conversation)."""
    return Message.objects.exclude(role=Message.Role.SUPERSEDED).exclude(
        messages_withheld_filter(user=reader)
    )


def history_items(
    conversations: Sequence[Conversation], *, reader: Reader, query: str = ""
) -> list[HistoryItem]:
    """The page's conversations, each with the text around the first message matching that
    `reader` may read."""
    query = query_clean(query)
    if not query or not conversations:
        return [HistoryItem(conversation=c) for c in conversations]
    first_matches = (
        _messages_readable(reader)
        .filter(conversation_id__in=[c.pk for c in conversations], content__icontains=query)
        .order_by("conversation_id", "created_at", "id")
        .distinct("conversation_id")
        .values_list("conversation_id", "content")
    )
    snippets = {
        conversation_id: snippet_around(content, query)
        for conversation_id, content in first_matches
    }
    return [HistoryItem(conversation=c, snippet=snippets.get(c.pk, "")) for c in conversations]


def snippet_around(text: str, query: str, *, width: int = SNIPPET_CHARS) -> str:
    """About `width` characters of `text` around the first occurrence of `query`."""
    text = " ".join(text.split())
    at = text.lower().find(query.lower())
    if at < 0 or len(text) <= width:
        return text[:width] + ("…" if len(text) > width else "")
    start = max(0, at - width // 3)
    end = min(len(text), start + width)
    start = max(0, end - width)
    if start > 0:
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < at else start
    snippet = text[start:end]
    return ("…" if start > 0 else "") + snippet + ("…" if end < len(text) else "")
