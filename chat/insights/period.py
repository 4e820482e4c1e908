"""The insights' period: the local dates a page or an export covers, shown per day or per
week, as the query string asks for it (`period_parse`), and its day or week buckets.
Days and weeks are in the server's `TIME_ZONE` (weeks start on Monday).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Literal

from django.utils import timezone

Granularity = Literal["day", "week"]

PERIOD_DAYS = (7, 30, 90)
DEFAULT_DAYS = 30
MAX_DAYS = 366
# Periods up to this many days are shown per day by default, longer ones per week.
DAILY_UP_TO = 31


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
