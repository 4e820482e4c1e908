"""The insights' figures, read from the stored exchanges by SQL aggregations.

An **exchange** is an assistant message answering a question (`reply_to` set); its time is
the answer's `created_at` (stored in the same statement as the question,
docs/decisions/0048-an-exchange-stored-and-finished-in-one-statement.md), in the server's
`TIME_ZONE` for days and weeks (weeks start on Monday). Its outcome is its status:
`complete` is answered, `refused` is refused (the refusal rate is refused / exchanges), anything
else (interrupted, error, streaming) is counted as an exchange only. Time to the first answer
event is taken over the answered exchanges (a refusal is not an answer). Active users are the
distinct owners of the conversations asked in (only the owner asks in a conversation).

Every figure is computed in PostgreSQL, each group in one statement; Python only fills empty
days and draws (docs/decisions/0120-insights-aggregated-in-sql.md).

Who sees what: the counts cover every exchange (they name nobody and no document); document and
collection names come only from documents the viewer may read (`knowledge.access`, applied in
the SQL before ranking); unanswered questions only from the conversations the admin shows them
(`chat.selectors.conversations_admin_filter`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Literal

import numpy as np
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from django.db.models import Count, Exists, F, Max, OuterRef, Q, TextField, Value, Window
from django.db.models.expressions import Func
from django.db.models.functions import Lower, Trim
from django.utils import timezone

from chat.models import Citation, Conversation, Feedback, Message
from chat.selectors import conversations_admin_filter
from knowledge import embedding
from knowledge.access import (
    Reader,
    documents_available_filter,
    documents_readable_filter,
    readable_documents_sql,
    reader_for,
)
from knowledge.models import Collection, Document

Granularity = Literal["day", "week"]

PERIOD_DAYS = (7, 30, 90)
DEFAULT_DAYS = 30
MAX_DAYS = 366
# Periods up to this many days are shown per day by default, longer ones per week.
DAILY_UP_TO = 31
REFUSAL_TARGET = 0.20  # the refusal ("RAG-miss") rate to stay under
TOP_DOCUMENTS = 10
TOP_COLLECTIONS = 10
NOT_CITED_SHOWN = 20
TOP_UNANSWERED = 8
# Distinct wordings of refused questions (the most asked) grouped by meaning on the page.
UNANSWERED_WORDINGS = 40
UNANSWERED_SIMILARITY = 0.85  # as chat/unanswered.py groups them


class PeriodError(ValueError):
    """A period asked for in the query string that cannot be shown; the message says why."""


@dataclass(frozen=True)
class Period:
    """The local dates `first`..`last` (inclusive), shown per `by`."""

    first: date
    last: date
    by: Granularity

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1

    @property
    def start(self) -> datetime:
        """The period's first instant (aware, in the current time zone)."""
        return timezone.make_aware(datetime.combine(self.first, time.min))

    @property
    def end(self) -> datetime:
        """The instant just after the period (exclusive)."""
        return timezone.make_aware(datetime.combine(self.last + timedelta(days=1), time.min))

    def buckets(self) -> list[date]:
        """The first day of each day or week (Monday) of the period, in order."""
        if self.by == "day":
            return [self.first + timedelta(days=n) for n in range(self.days)]
        monday = self.first - timedelta(days=self.first.weekday())
        weeks = []
        while monday <= self.last:
            weeks.append(monday)
            monday += timedelta(days=7)
        return weeks

    def previous(self) -> Period:
        """The period of the same length just before this one."""
        return Period(
            first=self.first - timedelta(days=self.days),
            last=self.first - timedelta(days=1),
            by=self.by,
        )


def _date_parse(value: str, name: str) -> date:
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise PeriodError(f"“{name}” must be a date written YYYY-MM-DD.") from None


def period_parse(params: Mapping[str, str], *, today: date) -> Period:
    """The period a query string asks for: `from` and `to` (YYYY-MM-DD, inclusive, at most
    MAX_DAYS days), else `days` (7, 30 or 90; DEFAULT_DAYS when absent) ending `today`;
    `by` (`day` or `week`; per day up to DAILY_UP_TO days, else per week, when absent).

    Raises PeriodError with a message a person can act on."""
    first_text, last_text = params.get("from", ""), params.get("to", "")
    if first_text or last_text:
        if not (first_text and last_text):
            raise PeriodError("Give both “from” and “to” dates, or neither.")
        first, last = _date_parse(first_text, "from"), _date_parse(last_text, "to")
        if first > last:
            raise PeriodError("“from” must not be after “to”.")
        if (last - first).days + 1 > MAX_DAYS:
            raise PeriodError(f"A period is at most {MAX_DAYS} days long.")
    else:
        days_text = params.get("days", "") or str(DEFAULT_DAYS)
        if days_text not in {str(days) for days in PERIOD_DAYS}:
            choices = ", ".join(str(days) for days in PERIOD_DAYS)
            raise PeriodError(f"“days” must be one of {choices}.")
        last = today
        first = today - timedelta(days=int(days_text) - 1)
    by = params.get("by", "")
    if by not in ("", "day", "week"):
        raise PeriodError("“by” must be “day” or “week”.")
    if not by:
        by = "day" if (last - first).days + 1 <= DAILY_UP_TO else "week"
    return Period(first=first, last=last, by=by)


# --- Exchanges: series, totals, modes ------------------------------------------------------
@dataclass
class Figures:
    """The exchanges of one bucket, one mode, or the whole period."""

    exchanges: int = 0
    answered: int = 0
    refused: int = 0
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


def _exchanges_sql() -> str:
    """One scan of the period's exchanges, grouped three ways at once (GROUPING SETS): per
    bucket, per answering mode, and the whole period. Parameters: granularity, time zone,
    start, end."""
    return f"""
        WITH exchange AS (
            SELECT date_trunc(%s, m.created_at AT TIME ZONE %s)::date AS bucket,
                   m.mode, m.status, m.first_event_ms, c.owner_id,
                   coalesce(fb.up, 0) AS up, coalesce(fb.down, 0) AS down
            FROM {_table(Message)} m
            JOIN {_table(Conversation)} c ON c.id = m.conversation_id
            LEFT JOIN (
                SELECT message_id,
                       count(*) FILTER (WHERE rating > 0) AS up,
                       count(*) FILTER (WHERE rating < 0) AS down
                FROM {_table(Feedback)} GROUP BY message_id
            ) fb ON fb.message_id = m.id
            WHERE m.role = 'assistant' AND m.reply_to_id IS NOT NULL
              AND m.created_at >= %s AND m.created_at < %s
        )
        SELECT GROUPING(bucket), GROUPING(mode), bucket, mode,
               count(*),
               count(*) FILTER (WHERE status = 'complete'),
               count(*) FILTER (WHERE status = 'refused'),
               count(DISTINCT owner_id),
               percentile_cont(0.5) WITHIN GROUP (ORDER BY first_event_ms)
                   FILTER (WHERE status = 'complete'),
               percentile_cont(0.95) WITHIN GROUP (ORDER BY first_event_ms)
                   FILTER (WHERE status = 'complete'),
               sum(up), sum(down)
        FROM exchange
        GROUP BY GROUPING SETS ((bucket), (mode), ())
    """


def exchanges_figures(*, period: Period) -> ExchangeFigures:
    """The period's exchanges: the totals, each day or week (every bucket, empty ones as
    zeros), and each answering mode (most used first). One statement."""
    params = [period.by, timezone.get_current_timezone_name(), period.start, period.end]
    with connection.cursor() as cursor:
        cursor.execute(_exchanges_sql(), params)
        rows = cursor.fetchall()
    total = Figures()
    buckets: dict[date, Figures] = {}
    modes: list[tuple[str, Figures]] = []
    for grouped_bucket, grouped_mode, bucket, mode, *values in rows:
        exchanges, answered, refused, users, p50, p95, up, down = values
        figures = Figures(
            exchanges=exchanges,
            answered=answered,
            refused=refused,
            users=users,
            first_event_p50_ms=p50,
            first_event_p95_ms=p95,
            thumbs_up=int(up or 0),
            thumbs_down=int(down or 0),
        )
        if grouped_bucket and grouped_mode:
            total = figures
        elif grouped_mode:
            buckets[bucket] = figures
        else:
            modes.append((mode or "unknown", figures))
    modes.sort(key=lambda item: (-item[1].exchanges, item[0]))
    return ExchangeFigures(
        total=total,
        by_bucket=[(day, buckets.get(day, Figures())) for day in period.buckets()],
        by_mode=modes,
    )


# --- Documents and collections --------------------------------------------------------------
@dataclass(frozen=True)
class CitedCount:
    id: int
    name: str
    answers: int  # answers of the period citing it
    citations: int


def _cited_sql(*, reader: Reader, by_collection: bool) -> tuple[str, list]:
    readable, params = readable_documents_sql(user=reader, document_id="d.id")
    if by_collection:
        key, join = "col.id, col.name", f"JOIN {_table(Collection)} col ON col.id = d.collection_id"
    else:
        key, join = "d.id, d.title", ""
    sql = f"""
        SELECT {key}, count(DISTINCT ci.message_id) AS answers, count(*) AS citations
        FROM {_table(Citation)} ci
        JOIN {_table(Message)} m ON m.id = ci.message_id
        JOIN {_table(Document)} d ON d.id = ci.document_id_snapshot
        {join}
        WHERE m.created_at >= %s AND m.created_at < %s AND {readable}
        GROUP BY {key}
        ORDER BY answers DESC, citations DESC, 2
        LIMIT %s
    """
    return sql, params


def _cited_top(
    *, period: Period, user: AbstractBaseUser | Reader, by_collection: bool, limit: int
) -> list[CitedCount]:
    sql, readable_params = _cited_sql(reader=reader_for(user), by_collection=by_collection)
    with connection.cursor() as cursor:
        cursor.execute(sql, [period.start, period.end, *readable_params, limit])
        return [CitedCount(*row) for row in cursor.fetchall()]


def documents_top_cited(
    *, period: Period, user: AbstractBaseUser | Reader, limit: int = TOP_DOCUMENTS
) -> list[CitedCount]:
    """The documents cited by the most answers of the period, among those `user` may read
    (filtered before ranking; documents since deleted are left out)."""
    return _cited_top(period=period, user=user, by_collection=False, limit=limit)


def collections_top_cited(
    *, period: Period, user: AbstractBaseUser | Reader, limit: int = TOP_COLLECTIONS
) -> list[CitedCount]:
    """The collections whose documents the most answers of the period cite, counting only
    the documents `user` may read."""
    return _cited_top(period=period, user=user, by_collection=True, limit=limit)


@dataclass(frozen=True)
class NotCited:
    count: int  # every such document
    shown: list[tuple[int, str]]  # (id, title) of the first few, by title


def documents_not_cited(
    *, period: Period, user: AbstractBaseUser | Reader, limit: int = NOT_CITED_SHOWN
) -> NotCited:
    """The available documents (enabled, ready, not expired) `user` may read that no answer
    of the period cites: how many, and the first `limit` by title."""
    cited = Citation.objects.filter(
        document_id_snapshot=OuterRef("pk"),
        message__created_at__gte=period.start,
        message__created_at__lt=period.end,
    )
    documents = (
        Document.objects.filter(documents_readable_filter(user=user), documents_available_filter())
        .filter(~Exists(cited))
        .order_by("title", "pk")
    )
    rows = list(
        documents.annotate(total=Window(Count("pk"))).values_list("pk", "title", "total")[:limit]
    )
    return NotCited(count=rows[0][2] if rows else 0, shown=[(pk, title) for pk, title, _ in rows])


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


def _wording_key() -> Func:
    """A question as compared: lower case, runs of white space as one space, trimmed."""
    return Trim(
        Lower(
            Func(
                F("reply_to__content"),
                Value(r"\s+"),
                Value(" "),
                Value("g"),
                function="regexp_replace",
                output_field=TextField(),
            )
        )
    )


def _question_key(text: str) -> str:
    return " ".join(text.lower().split()).rstrip("?!. ")


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
        key = _question_key(row["wording"])
        if key in merged:
            merged[key]["times"] += row["times"]
            merged[key]["last"] = max(merged[key]["last"], row["last"])
        else:
            merged[key] = dict(row)
    wordings = sorted(merged.values(), key=lambda row: (-row["times"], row["wording"]))
    texts = [embedding.truncate_to_limit(row["text"])[0] for row in wordings]
    vectors = embedding.embed_texts(texts)
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


def exchanges_export_rows(*, period: Period, batch: int = 2000) -> Iterator[tuple]:
    """The period's exchanges oldest first, one tuple per exchange in EXPORT_COLUMNS' order
    (raw values: the caller formats and neutralises them); the question's text only for a
    shared conversation (empty for a private one). Read in batches of `batch` rows."""
    counted = {
        "citation_count": Count("citations", distinct=True),
        "up": Count("feedback", filter=Q(feedback__rating__gt=0), distinct=True),
        "down": Count("feedback", filter=Q(feedback__rating__lt=0), distinct=True),
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
