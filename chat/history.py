"""The history page's reads: conversations a user may see, searched by title and message text
(the words of a message, by PostgreSQL full-text search over an indexed column); and the pages
of `GET /api/conversations`. Why: docs/decisions/0102-conversation-pages.md."""

from __future__ import annotations

import base64
import binascii
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.postgres.search import SearchQuery, SearchVector, SearchVectorExact
from django.db.models import Exists, OuterRef, Q, QuerySet

from chat.models import Conversation, Message
from chat.selectors import conversations_visible_to
from chat.withheld import messages_withheld_filter
from knowledge.access import Reader, reader_for

SEARCH_MAX_CHARS = 200
SNIPPET_CHARS = 180
# `GET /api/conversations`: conversations per page (docs/decisions/0102-conversation-pages.md).
PAGE_SIZE_DEFAULT = 50
PAGE_SIZE_MAX = 200


class CursorInvalid(ValueError):
    """A page cursor that this server did not hand out."""


@dataclass(frozen=True)
class ConversationCursor:
    """Where a page of conversations ends, in their order (newest `updated_at` first, then
    `created_at`, then id, all descending): the next page starts after it."""

    updated_at: datetime
    created_at: datetime
    id: uuid.UUID

    def encode(self) -> str:
        """Opaque to clients: URL-safe base64 of the three values."""
        values = [self.updated_at.isoformat(), self.created_at.isoformat(), str(self.id)]
        return base64.urlsafe_b64encode(json.dumps(values).encode()).decode().rstrip("=")

    @classmethod
    def decode(cls, text: str) -> ConversationCursor:
        """The cursor `encode` wrote; CursorInvalid for anything else."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            updated, created, pk = json.loads(raw)
            cursor = cls(
                datetime.fromisoformat(updated), datetime.fromisoformat(created), uuid.UUID(pk)
            )
        except (binascii.Error, ValueError, TypeError, AttributeError) as error:
            raise CursorInvalid("The cursor is not one this server gave.") from error
        if cursor.updated_at.tzinfo is None or cursor.created_at.tzinfo is None:
            raise CursorInvalid("The cursor is not one this server gave.")
        return cursor

    @classmethod
    def of(cls, conversation: Conversation) -> ConversationCursor:
        return cls(conversation.updated_at, conversation.created_at, conversation.pk)


@dataclass(frozen=True)
class ConversationPage:
    shared: list[Conversation]
    private: list[Conversation]
    next_cursor: ConversationCursor | None  # None: this is the last page


def conversations_page(
    *,
    user: AbstractBaseUser,
    title_search: str = "",
    limit: int = PAGE_SIZE_DEFAULT,
    after: ConversationCursor | None = None,
) -> ConversationPage:
    """One page of the conversations `user` may see in `GET /api/conversations`: shared ones
    and `user`'s private ones (never someone else's private ones, even for a superuser),
    newest first, at most `limit` (1..PAGE_SIZE_MAX) of both kinds together, those after
    `after`; `title_search` narrows to titles containing it (case-insensitively). One query of
    at most `limit + 1` rows (keyset pagination: the cost does not grow with the page's depth)."""
    if not 1 <= limit <= PAGE_SIZE_MAX:
        raise ValueError(f"limit must be from 1 to {PAGE_SIZE_MAX}")
    rows = conversations_visible_to(user)
    if title_search:
        rows = rows.filter(title__icontains=title_search)
    if after is not None:
        rows = rows.filter(
            Q(updated_at__lt=after.updated_at)
            | Q(updated_at=after.updated_at, created_at__lt=after.created_at)
            | Q(updated_at=after.updated_at, created_at=after.created_at, id__lt=after.id)
        )
    found = list(rows.order_by("-updated_at", "-created_at", "-id")[: limit + 1])
    page, more = found[:limit], len(found) > limit
    return ConversationPage(
        shared=[c for c in page if not c.is_private],
        private=[c for c in page if c.is_private],
        next_cursor=ConversationCursor.of(page[-1]) if more else None,
    )


@dataclass(frozen=True)
class HistoryItem:
    conversation: Conversation
    snippet: str = ""


def conversations_search(
    *, user: AbstractBaseUser, reader: Reader | None = None, query: str = ""
) -> QuerySet[Conversation]:
    """Conversations `user` may see, newest first; with a query, those whose title contains
    it (case-insensitively) or any message (question or answer) of which `user` may read
    matches its words (`message_text_matches`: full-text, English stemming, through the
    message's GIN index). Someone else's private conversations are never included, whatever
    matches; an answer withheld from `user` (`chat.withheld.messages_withheld_filter`, in the
    same SQL) never matches. `reader`: `user`'s `Reader`, when the caller has computed it."""
    conversations = conversations_visible_to(user)
    query = query_clean(query)
    if query:
        matching_message = _messages_readable(reader or reader_for(user)).filter(
            message_text_matches(query), conversation_id=OuterRef("pk")
        )
        conversations = conversations.filter(Q(title__icontains=query) | Exists(matching_message))
    return conversations


def query_clean(query: str) -> str:
    return " ".join((query or "").split())[:SEARCH_MAX_CHARS]


# The expression of the GIN index `message_content_fts` (chat/models.py): a filter on exactly
# this expression is what the index answers.
MESSAGE_TEXT_VECTOR = SearchVector("content", config="english")


def message_text_matches(query: str) -> Q:
    """Messages whose words match `query` (websearch syntax, `english` configuration: "leave"
    finds "leaves"; a query of stop words only finds nothing), as the GIN index on
    `message_content_fts` answers it."""
    websearch = SearchQuery(query, config="english", search_type="websearch")
    return Q(SearchVectorExact(MESSAGE_TEXT_VECTOR, websearch))


def _messages_readable(reader: Reader) -> QuerySet[Message]:
    """The messages whose text `reader` may read (none withheld from them), summaries and
    superseded answers left out (not part of their conversation as its readers see it)."""
    return Message.objects.exclude(role__in=Message.HIDDEN_ROLES).exclude(
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
        .filter(message_text_matches(query), conversation_id__in=[c.pk for c in conversations])
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
    """About `width` characters of `text` around the first occurrence of `query`, else of its
    first word found in `text` (a full-text match may hold the words apart)."""
    text = " ".join(text.split())
    lowered = text.lower()
    at = lowered.find(query.lower())
    for word in query.lower().split() if at < 0 else ():
        word = word.strip("\"'-")
        at = lowered.find(word) if word else -1
        if at >= 0:
            break
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
