"""The insights' figures, read from the stored exchanges by SQL aggregations.

An **exchange** is an assistant message answering a question (`reply_to` set); its time is
the answer's `created_at` (stored in the same statement as the question,
docs/decisions/0048-an-exchange-stored-and-finished-in-one-statement.md), in the server's
`TIME_ZONE` for days and weeks (weeks start on Monday). Its outcome is its status:
`complete` is answered (`flagged` among them: answered with the weak-evidence notice,
`Message.evidence` "weak"), `refused` is refused (the refusal rate is refused / exchanges), anything
else (interrupted, error, streaming) is counted as an exchange only. Time to the first answer
event is taken over the answered exchanges (a refusal is not an answer). Active users are the
distinct owners of the conversations asked in (only the owner asks in a conversation).

Every figure covers a `Period` (chat/insights/period.py) and is computed in PostgreSQL, each
group in one statement; Python only fills empty days and draws
(docs/decisions/0120-insights-aggregated-in-sql.md).

Who sees what: the counts cover every exchange (they name nobody and no document); document and
collection names come only from documents the viewer may read (`knowledge.access`, applied in
the SQL before ranking); unanswered questions only from the conversations the admin shows them
(`chat.selectors.conversations_admin_filter`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime

import numpy as np
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import EmptyResultSet
from django.db import connection, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import (
    BooleanField,
    Count,
    ExpressionWrapper,
    F,
    Max,
    OuterRef,
    Subquery,
)
from django.db.models.functions import Coalesce, Lower, Trim
from django.utils import timezone

from chat.insights.period import Period
from chat.models import Citation, Conversation, Feedback, Message
from chat.selectors import conversations_admin_filter
from chat.unanswered import SIMILARITY_THRESHOLD
from chat.unanswered import _key as question_key
from knowledge import embedding
from knowledge.access import (
    Reader,
    documents_available_filter,
    documents_readable_filter,
    reader_for,
)
from knowledge.models import Collection, Document

REFUSAL_TARGET = 0.20  # the refusal ("RAG-miss") rate to stay under
TOP_DOCUMENTS = 10
TOP_COLLECTIONS = 10
NOT_CITED_SHOWN = 20
TOP_UNANSWERED = 8
# Distinct wordings of refused questions (the most asked) grouped by meaning on the page.
UNANSWERED_WORDINGS = 40
UNANSWERED_SIMILARITY = SIMILARITY_THRESHOLD  # as the unanswered questions report groups them
# Memory for the sorts of one statement (PostgreSQL's default, 4MB, spills to disk at 100,000
# exchanges).
WORK_MEM = "64MB"


# --- Exchanges: series, totals, modes ------------------------------------------------------
@dataclass
class Figures:
    """The exchanges of one bucket, one mode, or the whole period."""

    exchanges: int = 0
    answered: int = 0
    refused: int = 0
    flagged: int = 0  # answered with the weak-evidence notice (docs/product.md §4)
    users: int = 0
    first_event_p50_ms: float | None = None
    first_event_p95_ms: float | None = None
    thumbs_up: int = 0
    thumbs_down: int = 0

    @property
    def other(self) -> int:
        """Exchanges neither answered nor refused (interrupted, failed, in progress)."""
        return self.exchanges - self.answered - self.refused

    @property
    def refusal_rate(self) -> float | None:
        return self.refused / self.exchanges if self.exchanges else None

    @property
    def rated(self) -> int:
        return self.thumbs_up + self.thumbs_down

    @property
    def thumbs_down_rate(self) -> float | None:
        """Thumbs down among the ratings given."""
        return self.thumbs_down / self.rated if self.rated else None


@dataclass
class ExchangeFigures:
    total: Figures
    by_bucket: list[tuple[date, Figures]]
    by_mode: list[tuple[str, Figures]]


def _table(model) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@contextmanager
def _cursor() -> Iterator[CursorWrapper]:
    """A cursor in a transaction whose sorts (percentiles, distinct counts) get WORK_MEM, so
    that they stay in memory (docs/decisions/0120-insights-aggregated-in-sql.md)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL work_mem = '{WORK_MEM}'")
        yield cursor


# The period's exchanges (parameters: granularity, time zone, start, end).
_EXCHANGES = """
    SELECT date_trunc(%s, m.created_at AT TIME ZONE %s)::date AS bucket, m.mode,
           {columns}
    FROM {message} m {join}
    WHERE m.role = 'assistant' AND m.reply_to_id IS NOT NULL
      AND m.created_at >= %s AND m.created_at < %s
"""


def _grouped(grouping_sets: str) -> tuple[str, str]:
    """The key columns (GROUPING(bucket), GROUPING(mode), bucket, mode) and GROUP BY clause
    for `grouping_sets` of `bucket` and `mode`; for "()" (everything together) constants and
    no GROUP BY."""
    if grouping_sets == "()":
        return "1, 1, NULL::date, NULL", ""
    return (
        "GROUPING(bucket), GROUPING(mode), bucket, mode",
        f"GROUP BY GROUPING SETS ({grouping_sets})",
    )


def _exchanges_sql(*, grouping_sets: str) -> str:
    """The exchanges' figures in one scan, grouped by `grouping_sets` (of `bucket`, `mode`):
    GROUPING(bucket), GROUPING(mode), bucket, mode, exchanges, answered, refused, flagged, users,
    p50, p95."""
    keys, group_by = _grouped(grouping_sets)
    exchanges = _EXCHANGES.format(
        columns="m.status, m.evidence, m.first_event_ms, c.owner_id",
        message=_table(Message),
        join=f"JOIN {_table(Conversation)} c ON c.id = m.conversation_id",
    )
    return f"""
        SELECT {keys},
               count(*),
               count(*) FILTER (WHERE status = 'complete'),
               count(*) FILTER (WHERE status = 'refused'),
               count(*) FILTER (WHERE status = 'complete' AND evidence = 'weak'),
               count(DISTINCT owner_id),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY first_event_ms)
                   FILTER (WHERE status = 'complete'),
               percentile_cont(0.95) WITHIN GROUP (ORDER BY first_event_ms)
                   FILTER (WHERE status = 'complete')
        FROM ({exchanges}) exchange
        {group_by}
    """


def _ratings_sql(*, grouping_sets: str) -> str:
    """The ratings of the exchanges, grouped like `_exchanges_sql`: GROUPING(bucket),
    GROUPING(mode), bucket, mode, thumbs up, thumbs down."""
    keys, group_by = _grouped(grouping_sets)
    rated = _EXCHANGES.format(
        columns="f.rating",
        message=_table(Message),
        join=f"JOIN {_table(Feedback)} f ON f.message_id = m.id",
    )
    return f"""
        SELECT {keys},
               count(*) FILTER (WHERE rating > 0), count(*) FILTER (WHERE rating < 0)
        FROM ({rated}) rated
        {group_by}
    """


def _figures_grouped(period: Period, grouping_sets: str) -> dict[tuple, Figures]:
    """{(bucket or None, mode or None): Figures} for `grouping_sets`; two statements."""
    params = [period.by, timezone.get_current_timezone_name(), period.start, period.end]
    figures: dict[tuple, Figures] = {}
    with _cursor() as cursor:
        cursor.execute(_exchanges_sql(grouping_sets=grouping_sets), params)
        for by_bucket, by_mode, bucket, mode, *values in cursor.fetchall():
            exchanges, answered, refused, flagged, users, p50, p95 = values
            figures[(None if by_bucket else bucket, None if by_mode else mode)] = Figures(
                exchanges=exchanges,
                answered=answered,
                refused=refused,
                flagged=flagged,
                users=users,
                first_event_p50_ms=p50,
                first_event_p95_ms=p95,
            )
        cursor.execute(_ratings_sql(grouping_sets=grouping_sets), params)
        for by_bucket, by_mode, bucket, mode, up, down in cursor.fetchall():
            key = (None if by_bucket else bucket, None if by_mode else mode)
            if key in figures:
                figures[key].thumbs_up, figures[key].thumbs_down = up, down
    return figures


def exchanges_figures(*, period: Period) -> ExchangeFigures:
    """The period's exchanges: the totals, each day or week (every bucket, empty ones as
    zeros), and each answering mode (most used first). Two statements, each one scan
    grouped three ways at once (GROUPING SETS)."""
    grouped = _figures_grouped(period, "(bucket), (mode), ()")
    modes = [
        (mode or "unknown", figures)
        for (bucket, mode), figures in grouped.items()
        if bucket is None and mode is not None
    ]
    modes.sort(key=lambda item: (-item[1].exchanges, item[0]))
    return ExchangeFigures(
        total=grouped.get((None, None), Figures()),
        by_bucket=[(day, grouped.get((day, None), Figures())) for day in period.buckets()],
        by_mode=modes,
    )


def exchanges_totals(*, period: Period) -> Figures:
    """The period's exchanges taken together (`exchanges_figures(...).total` alone)."""
    return _figures_grouped(period, "()").get((None, None), Figures())


# --- Documents and collections --------------------------------------------------------------
@dataclass(frozen=True)
class CitedCount:
    id: int
    name: str
    answers: int  # answers of the period citing it
    citations: int


@dataclass(frozen=True)
class NotCited:
    count: int  # every such document
    shown: list[tuple[int, str]]  # (id, title) of the first few, by title


@dataclass(frozen=True)
class DocumentFigures:
    documents: list[CitedCount]  # the most cited first
    collections: list[CitedCount]
    not_cited: NotCited


def _readable_sql(reader: Reader) -> tuple[str, list] | None:
    """The documents `reader` may read as an SQL query (id, title, collection_id, available)
    with its parameters, compiled by Django from `knowledge.access`'s filter; None when they
    read nothing."""
    available = ExpressionWrapper(documents_available_filter(), output_field=BooleanField())
    documents = (
        Document.objects.filter(documents_readable_filter(user=reader))
        .annotate(available=available)
        .values("id", "title", "collection_id", "available")
        .order_by()
    )
    try:
        sql, params = documents.query.sql_with_params()
    except EmptyResultSet:
        return None
    return sql, list(params)


def _documents_sql(readable: str) -> str:
    """Parameters: start, end, the readable query's, not-cited limit, top limit, top limit.
    Every count is a hash aggregate over (answer, document) pairs: no DISTINCT to sort."""
    return f"""
        WITH pairs AS MATERIALIZED (
            SELECT ci.message_id, ci.document_id_snapshot AS document_id,
                   count(*) AS citations
            FROM {_table(Citation)} ci JOIN {_table(Message)} m ON m.id = ci.message_id
            WHERE m.role = 'assistant' AND m.reply_to_id IS NOT NULL
              AND m.created_at >= %s AND m.created_at < %s
              AND ci.document_id_snapshot IS NOT NULL
            GROUP BY ci.message_id, ci.document_id_snapshot
        ), readable AS MATERIALIZED ({readable}),
        per_document AS MATERIALIZED (
            SELECT p.document_id AS id, count(*) AS answers, sum(p.citations) AS citations
            FROM pairs p JOIN readable r ON r.id = p.document_id
            GROUP BY p.document_id
        ),
        per_collection AS (
            SELECT collection_id AS id, count(*) AS answers, sum(citations) AS citations
            FROM (
                SELECT p.message_id, r.collection_id, sum(p.citations) AS citations
                FROM pairs p JOIN readable r ON r.id = p.document_id
                GROUP BY p.message_id, r.collection_id
            ) answer_collection
            GROUP BY collection_id
        )
        (SELECT 'not cited', r.id, r.title, count(*) OVER (), 0
         FROM readable r
         WHERE r.available AND NOT EXISTS (SELECT 1 FROM per_document d WHERE d.id = r.id)
         ORDER BY r.title, r.id LIMIT %s)
        UNION ALL
        (SELECT 'document', d.id, r.title, d.answers, d.citations
         FROM per_document d JOIN readable r ON r.id = d.id
         ORDER BY d.answers DESC, d.citations DESC, r.title LIMIT %s)
        UNION ALL
        (SELECT 'collection', k.id, k.name, c.answers, c.citations
         FROM per_collection c JOIN {_table(Collection)} k ON k.id = c.id
         ORDER BY c.answers DESC, c.citations DESC, k.name LIMIT %s)
    """


def documents_cited(
    *,
    period: Period,
    user: AbstractBaseUser | Reader,
    top: int = TOP_DOCUMENTS,
    not_cited_shown: int = NOT_CITED_SHOWN,
) -> DocumentFigures:
    """Of the documents `user` may read (the rule applied before anything is counted or
    ranked; documents since deleted are left out): the `top` cited by the most answers of
    the period, the `top` collections likewise, and the available ones (enabled, ready, not
    expired) that no answer of the period cites: how many, and the first `not_cited_shown` by
    title. One statement."""
    readable = _readable_sql(reader_for(user))
    if readable is None:
        return DocumentFigures(documents=[], collections=[], not_cited=NotCited(0, []))
    readable_sql, readable_params = readable
    params = [period.start, period.end, *readable_params, not_cited_shown, top, top]
    with _cursor() as cursor:
        cursor.execute(_documents_sql(readable_sql), params)
        rows = cursor.fetchall()
    documents, collections, not_cited, not_cited_count = [], [], [], 0
    for kind, pk, name, answers, citations in rows:
        if kind == "not cited":
            not_cited.append((pk, name))
            not_cited_count = answers
        elif kind == "document":
            documents.append(CitedCount(pk, name, answers, citations))
        else:
            collections.append(CitedCount(pk, name, answers, citations))
    return DocumentFigures(
        documents=documents,
        collections=collections,
        not_cited=NotCited(count=not_cited_count, shown=not_cited),
    )


# --- Unanswered questions -------------------------------------------------------------------
@dataclass
class UnansweredTop:
    """Refused questions meaning nearly the same thing: the most asked wording first."""

    wordings: list[tuple[str, int]] = field(default_factory=list)  # (question, times asked)
    last_asked: datetime | None = None

    @property
    def text(self) -> str:
        return self.wordings[0][0]

    @property
    def count(self) -> int:
        return sum(times for _, times in self.wordings)


def _wording_key() -> Lower:
    """A question as counted in SQL: lower case, trimmed (white space inside and a final "?"
    are evened out in Python, `chat.unanswered`'s key)."""
    return Lower(Trim(F("reply_to__content")))


_VECTORS: dict[tuple[str, str], np.ndarray] = {}
VECTORS_KEPT = 5000


def _wording_vectors(texts: list[str]) -> np.ndarray:
    """The embeddings of `texts`, those already computed by this process taken from a
    dictionary (keyed by the model's version and the text; emptied when it holds
    VECTORS_KEPT), the others computed in one batch."""
    version = embedding.model_version()
    known = {text: _VECTORS.get((version, text)) for text in texts}
    missing = [text for text, vector in known.items() if vector is None]
    if missing:
        fitted = [embedding.truncate_to_limit(text)[0] for text in missing]
        if len(_VECTORS) + len(missing) > VECTORS_KEPT:
            _VECTORS.clear()
        for text, vector in zip(missing, embedding.embed_texts(fitted), strict=True):
            known[text] = _VECTORS[(version, text)] = vector
    return np.stack([known[text] for text in texts])


def unanswered_top(
    *, period: Period, user: AbstractBaseUser, limit: int = TOP_UNANSWERED
) -> list[UnansweredTop]:
    """The largest groups of the period's refused questions, among the conversations the
    admin shows `user`: identical wordings are counted in SQL (the UNANSWERED_WORDINGS most
    asked), then near-duplicates merged by the cosine similarity of their embeddings (greedy,
    most asked first, as chat/unanswered.py does). Largest first."""
    rows = list(
        Message.objects.filter(
            conversations_admin_filter(user, prefix="conversation__"),
            role=Message.Role.ASSISTANT,
            status=Message.Status.REFUSED,
            reply_to__isnull=False,
            created_at__gte=period.start,
            created_at__lt=period.end,
        )
        .annotate(wording=_wording_key())
        .values("wording")
        .annotate(times=Count("pk"), last=Max("created_at"), text=Max("reply_to__content"))
        .order_by("-times", "wording")[:UNANSWERED_WORDINGS]
    )
    if not rows:
        return []
    merged: dict[str, dict] = {}
    for row in rows:  # "Refund?" and "refund" are one wording
        key = question_key(row["wording"])
        if key in merged:
            merged[key]["times"] += row["times"]
            merged[key]["last"] = max(merged[key]["last"], row["last"])
        else:
            merged[key] = dict(row)
    wordings = sorted(merged.values(), key=lambda row: (-row["times"], row["wording"]))
    vectors = _wording_vectors([row["text"] for row in wordings])
    groups: list[UnansweredTop] = []
    heads: list[np.ndarray] = []
    for row, vector in zip(wordings, vectors, strict=True):
        target = None
        if heads:
            similarities = np.stack(heads) @ vector
            best = int(np.argmax(similarities))
            if similarities[best] >= UNANSWERED_SIMILARITY:
                target = groups[best]
        if target is None:
            target = UnansweredTop()
            groups.append(target)
            heads.append(vector)
        target.wordings.append((row["text"], row["times"]))
        target.last_asked = max(filter(None, [target.last_asked, row["last"]]))
    groups.sort(key=lambda group: (-group.count, group.text))
    return groups[:limit]


# --- The export -----------------------------------------------------------------------------
EXPORT_COLUMNS = (
    "time",
    "user",
    "conversation",
    "visibility",
    "mode",
    "outcome",
    "first_event_ms",
    "total_ms",
    "citations",
    "thumbs_up",
    "thumbs_down",
    "question",
)


def _per_answer_count(model, **filters) -> Coalesce:
    """How many rows of `model` (citations, feedback) point at the answer, as a correlated
    subquery (read from the model's index on `message`)."""
    rows = (
        model.objects.filter(message=OuterRef("pk"), **filters)
        .order_by()
        .values("message")
        .annotate(count=Count("pk"))
        .values("count")
    )
    return Coalesce(Subquery(rows), 0)


def exchanges_export_rows(*, period: Period, batch: int = 2000) -> Iterator[tuple]:
    """The period's exchanges oldest first, one tuple per exchange in EXPORT_COLUMNS' order
    (raw values: the caller formats and neutralises them); the question's text only for a
    shared conversation (empty for a private one). Read in batches of `batch` rows."""
    counted = {
        "citation_count": _per_answer_count(Citation),
        "up": _per_answer_count(Feedback, rating__gt=0),
        "down": _per_answer_count(Feedback, rating__lt=0),
    }
    exchanges = (
        Message.objects.filter(
            role=Message.Role.ASSISTANT,
            reply_to__isnull=False,
            created_at__gte=period.start,
            created_at__lt=period.end,
        )
        .annotate(**counted)
        .order_by("created_at", "pk")
        .values_list(
            "created_at",
            "conversation__owner__username",
            "conversation_id",
            "conversation__is_private",
            "mode",
            "status",
            "first_event_ms",
            "total_ms",
            "citation_count",
            "up",
            "down",
            "reply_to__content",
        )
    )
    for row in exchanges.iterator(chunk_size=batch):
        (at, username, conversation_id, private, mode, status, first, total, *counts, question) = (
            row
        )
        yield (
            timezone.localtime(at),
            username,
            conversation_id,
            "private" if private else "shared",
            mode,
            status,
            first,
            total,
            *counts,
            "" if private else question,
        )
