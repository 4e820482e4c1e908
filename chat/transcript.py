"""A conversation's messages as plain rows (`MessageRow`, `CitationRow`) as a reader may read
them: the transcript the pages, the API and the socket render, withheld answers replaced by their
notice, and the stale check of citations in SQL (`citation_fresh`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.db.models import (
    BooleanField,
    ExpressionWrapper,
    F,
    JSONField,
    Q,
)

from chat.citations import citation_is_stale
from chat.models import Citation, Conversation, Feedback, Message
from chat.withheld import Withheld, messages_withheld
from knowledge.access import (
    UserLike,
)
from knowledge.models import Chunk, Document
from knowledge.search_scope import not_expired


@dataclass(frozen=True, slots=True)
class CitationRow:
    """A stored citation as a plain value (what the API and the page show of it)."""

    n: int
    chunk_id: int | None
    chunk_id_snapshot: int | None
    document_id_snapshot: int | None
    document_title: str
    page: int | None
    section: str | None
    sheet: str | None
    cells: str | None
    ocr_confidence: float | None
    url: str
    text: str
    similarity: float
    chunk_index: int | None
    stale: bool  # see citation_is_stale


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A stored message and its citations as a plain, hashable value: equal rows show the
    same, so a row is also the key of what was rendered from it."""

    id: uuid.UUID
    role: str
    content: str
    status: str
    reply_to_id: uuid.UUID | None
    mode: str
    suggestions: tuple[str, ...]
    warning: str
    search_query: str
    searched_document_id: int | None  # the document its question named (named_documents.py)
    searched_document_title: str
    error_code: str
    # Every document its question named and it was searched in, (id, title) pairs (see
    # Message.searched_documents): empty for one stored before, or none.
    searched_documents: tuple[tuple[int, str], ...]
    evidence: str  # Message.Evidence of an answer ("" otherwise)
    created_at: datetime
    citations: tuple[CitationRow, ...]
    withheld: str = ""  # a `Withheld` reason: the row then holds the notice, not the answer

    def __post_init__(self) -> None:
        # The stored JSON `[{id, title}]` as (id, title) pairs: the row stays hashable.
        pairs = tuple(
            (int(d["id"]), str(d["title"])) if isinstance(d, dict) else tuple(d)
            for d in self.searched_documents or ()
        )
        object.__setattr__(self, "searched_documents", pairs)

    @property
    def pk(self) -> uuid.UUID:
        return self.id


# Columns read, in the order of the rows' fields.
_MESSAGE_COLUMNS = tuple(
    f.name for f in fields(MessageRow) if f.name not in {"citations", "withheld"}
)
_CITATION_COLUMNS = tuple(f.name for f in fields(CitationRow) if f.name != "stale")
_SUGGESTIONS = _MESSAGE_COLUMNS.index("suggestions")


def _suggestions(value: object) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


def row_withheld(row: MessageRow, reason: Withheld) -> MessageRow:
    """`row` as shown to a reader it is withheld from: the notice for text, and nothing of the
    answer (no citations, search query, searched document, warning or suggestions)."""
    return replace(
        row,
        content=reason.notice,
        mode="",
        suggestions=(),
        warning="",
        search_query="",
        searched_document_id=None,
        searched_document_title="",
        searched_documents=(),
        citations=(),
        withheld=str(reason),
    )


def rows_for_reader(
    rows: Sequence[MessageRow], withheld: dict[uuid.UUID, Withheld]
) -> list[MessageRow]:
    """`rows`, those of `withheld` replaced by what their reader sees (`row_withheld`)."""
    return [row_withheld(row, withheld[row.id]) if row.id in withheld else row for row in rows]


def citation_fresh() -> ExpressionWrapper:
    """SQL for "not stale" (`citation_is_stale` in the database): the cited chunk still
    exists with the very text cited, in an enabled, ready, unexpired document. NULL (not
    fresh) when the chunk is gone: its columns come from LEFT JOINs on primary keys."""
    return ExpressionWrapper(
        Q(
            not_expired("chunk__document__"),
            chunk__text=F("text"),
            chunk__document__enabled=True,
            chunk__document__status=Document.Status.READY,
        ),
        output_field=BooleanField(),
    )


def conversation_transcript(conversation: Conversation, *, user: UserLike) -> list[MessageRow]:
    """The conversation's messages in order with their citations, as rows, as `user` may read
    them: an answer drawing on a document `user` may not read is withheld (`row_withheld`).
    Three queries of plain values whatever the length (no model instances, the stale check done
    in SQL), none more for a superuser."""
    cited: dict[uuid.UUID, list[CitationRow]] = {}
    citations = (
        Citation.objects.filter(message__conversation=conversation)
        .annotate(fresh=citation_fresh())
        .order_by("message_id", "n")
        .values_list("message_id", *_CITATION_COLUMNS, "fresh")
    )
    for message_id, *values, fresh in citations:
        cited.setdefault(message_id, []).append(CitationRow(*values, stale=not fresh))
    messages = (
        conversation.messages.exclude(role__in=Message.HIDDEN_ROLES)
        .order_by("created_at", "id")
        .values_list(*_MESSAGE_COLUMNS)
    )
    rows = [
        MessageRow(
            *values[:_SUGGESTIONS],
            _suggestions(values[_SUGGESTIONS]),
            *values[_SUGGESTIONS + 1 :],
            citations=tuple(cited.get(values[0], ())),
        )
        for values in messages
    ]
    answered = any(row.role == Message.Role.ASSISTANT for row in rows)
    withheld = messages_withheld(user=user, conversation_id=conversation.pk) if answered else {}
    return rows_for_reader(rows, withheld)


def answer_row_read(
    answer_id: uuid.UUID | str,
    *,
    conversation_id: uuid.UUID | str,
    rater: AbstractBaseUser | AnonymousUser | None = None,
) -> tuple[MessageRow, int | None] | None:
    """The row of the message `answer_id` of the conversation `conversation_id` with its
    citations (their stale check in SQL, as `citation_fresh`), and the rating `rater` gave it
    (None: not rated, or no rater); None when there is no such message there. Not withheld
    here: the caller decides for its reader (`message_views`). One statement written out, for
    the end of every answer over the socket (docs/decisions/0152-statements-written-out.md):
    a row per citation, the message's columns on each."""
    rater_id = rater.pk if rater is not None else None
    with connection.cursor() as cursor:
        cursor.execute(_ANSWER_SQL, [rater_id, str(answer_id), str(conversation_id)])
        rows = cursor.fetchall()
    if not rows:
        return None
    width = len(_MESSAGE_COLUMNS)
    # JSON columns come as text from a plain cursor (Django's JSONField decodes them itself).
    values = [
        json.loads(value) if index in _JSON_INDEXES and isinstance(value, str) else value
        for index, value in enumerate(rows[0][:width])
    ]
    rating = rows[0][width]
    cited = [row[width + 1 :] for row in rows if row[width + 1] is not None]  # n: never NULL
    row = MessageRow(
        *values[:_SUGGESTIONS],
        _suggestions(values[_SUGGESTIONS]),
        *values[_SUGGESTIONS + 1 :],
        citations=tuple(CitationRow(*c[:-1], stale=not c[-1]) for c in cited),
    )
    return row, rating


def _answer_sql() -> str:
    message = Message._meta
    columns = ", ".join(f"m.{message.get_field(name).column}" for name in _MESSAGE_COLUMNS)
    citation = Citation._meta
    cited = ", ".join(f"c.{citation.get_field(name).column}" for name in _CITATION_COLUMNS)
    feedback = Feedback._meta
    # Fresh: the cited chunk still holds the very text cited, in an enabled, ready, unexpired
    # document (`citation_fresh`); not when the chunk is gone.
    return (
        f"SELECT {columns}, (SELECT f.rating FROM {feedback.db_table} f "
        "WHERE f.message_id = m.id AND f.user_id = %s), "
        f"{cited}, COALESCE(k.text = c.text AND d.enabled AND d.status = "
        f"'{Document.Status.READY.value}' AND (d.expires_at IS NULL OR d.expires_at > now()), "
        f"FALSE) FROM {message.db_table} m "
        f"LEFT JOIN {citation.db_table} c ON c.message_id = m.id "
        f"LEFT JOIN {Chunk._meta.db_table} k ON k.id = c.chunk_id "
        f"LEFT JOIN {Document._meta.db_table} d ON d.id = k.document_id "
        "WHERE m.id = %s::uuid AND m.conversation_id = %s::uuid ORDER BY c.n"
    )


_ANSWER_SQL = _answer_sql()
_JSON_INDEXES = frozenset(
    index
    for index, name in enumerate(_MESSAGE_COLUMNS)
    if isinstance(Message._meta.get_field(name), JSONField)
)


def message_row(message: Message) -> MessageRow:
    """The row of a message instance (its citations loaded, ideally prefetched with
    `citations_with_source_state`, else one query here)."""
    return _row_of(message, message.citations.all(), stale=citation_is_stale)


def finished_answer_row(answer: Message, citations: Sequence[Citation]) -> MessageRow:
    """The row of `answer` as `services.answer_finish` has just stored it (`answer` given to it:
    its fields set to what was written; `citations` what it returned), not read back. A
    citation is stale when its chunk was gone as the answer was stored (`chunk_id` None), fresh
    otherwise: what the stale check (`citation_fresh`) finds at that moment, its chunk and
    document having just been searched."""
    return _row_of(answer, citations, stale=lambda citation: citation.chunk_id is None)


def _row_of(
    message: Message, citations: Iterable[Citation], *, stale: Callable[[Citation], bool]
) -> MessageRow:
    return MessageRow(
        id=message.pk,
        role=str(message.role),
        content=message.content,
        status=str(message.status),
        reply_to_id=message.reply_to_id,
        mode=str(message.mode),
        suggestions=_suggestions(message.suggestions),
        warning=message.warning,
        search_query=message.search_query,
        searched_document_id=message.searched_document_id,
        searched_document_title=message.searched_document_title,
        searched_documents=tuple(message.searched_documents or ()),
        error_code=message.error_code,
        evidence=str(message.evidence),
        created_at=message.created_at,
        citations=tuple(
            CitationRow(
                *(getattr(citation, column) for column in _CITATION_COLUMNS),
                stale=stale(citation),
            )
            for citation in sorted(citations, key=lambda c: c.n)
        ),
    )
