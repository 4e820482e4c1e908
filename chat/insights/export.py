"""The insights' CSV export: one row per exchange of a period (`selectors.EXPORT_COLUMNS`),
every cell neutralised against formula injection."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator, Iterable, Iterator
from datetime import datetime

from asgiref.sync import sync_to_async

from chat.insights.period import Period
from chat.insights.selectors import EXPORT_COLUMNS, exchanges_export_rows

# A spreadsheet reads a cell starting with one of these as a formula (OWASP "CSV Injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
ROWS_PER_PART = 1000


def cell_neutralise(value: object) -> str:
    """`value` as a CSV cell's text: empty for None, ISO 8601 for a time, a float with one
    decimal, and any text a spreadsheet would take for a formula (starting with = + - @, a tab
    or a carriage return) prefixed with an apostrophe, so it is shown as text."""
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, float):
        return f"{value:.1f}"
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def csv_lines(rows: Iterable[Iterable[object]]) -> str:
    """`rows` as CSV text (RFC 4180 quoting, CRLF line ends), each cell neutralised."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    for row in rows:
        writer.writerow([cell_neutralise(value) for value in row])
    return buffer.getvalue()


def _parts(rows: Iterator[tuple], size: int) -> Iterator[str]:
    yield csv_lines([EXPORT_COLUMNS])
    while True:
        batch = [row for _, row in zip(range(size), rows, strict=False)]
        if not batch:
            return
        yield csv_lines(batch)


def export_csv(*, period: Period, rows_per_part: int = ROWS_PER_PART) -> Iterator[str]:
    """The period's export as CSV text in parts: the header, then `rows_per_part` exchanges a
    part."""
    return _parts(exchanges_export_rows(period=period), rows_per_part)


async def export_csv_async(*, period: Period) -> AsyncIterator[str]:
    """`export_csv` for a streaming response under ASGI: each part is read from the database
    on the request's thread (`sync_to_async`), so the export is sent as it is read, never held
    whole in memory."""
    parts = export_csv(period=period)
    done = object()
    while True:
        part = await sync_to_async(next, thread_sensitive=True)(parts, done)
        if part is done:
            return
        yield part
