"""Spreadsheet cells: references (`A4:E4`, parsed, joined, read back as row numbers) and values
as a person reads them (numbers in their cell format, dates "15 March 2026", booleans TRUE /
FALSE, a cell longer than MAX_CELL_CHARS cut with "…").

Shared by the .xlsx and .csv readers (knowledge/parsers/spreadsheets.py), the .ods reader
(knowledge/parsers/opendocument.py), chunking (a chunk's `cells`) and the readers of stored
chunks (knowledge/selectors.py).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable
from dataclasses import dataclass

from knowledge.parsers.base import clean_inline

MAX_CELL_CHARS = 2000  # a longer cell is cut (with "…"): a row must stay readable

_RANGE = re.compile(r"^([A-Z]{1,3})(\d+)(?::([A-Z]{1,3})(\d+))?$")


# --- Cell references -----------------------------------------------------------------------


def column_letter(index: int) -> str:
    """1 → "A", 27 → "AA"."""
    letters = ""
    while index > 0:
        index, remainder = divmod(index - 1, 26)
        letters = chr(65 + remainder) + letters
    return letters


def column_index(letters: str) -> int:
    """Column letters to a number: "A" → 1, "AA" → 27."""
    index = 0
    for letter in letters:
        index = index * 26 + ord(letter) - 64
    return index


def cell_range(first_row: int, last_row: int, first_column: int, last_column: int) -> str:
    """The range as written: "A4:E6" (or "B7" for a single cell)."""
    start = f"{column_letter(first_column)}{first_row}"
    end = f"{column_letter(last_column)}{last_row}"
    return start if start == end else f"{start}:{end}"


@dataclass(frozen=True)
class CellRange:
    first_row: int
    last_row: int
    first_column: int
    last_column: int

    def __str__(self) -> str:
        return cell_range(self.first_row, self.last_row, self.first_column, self.last_column)

    def rows(self) -> range:
        return range(self.first_row, self.last_row + 1)

    def with_rows(self, first_row: int, last_row: int) -> CellRange:
        return CellRange(first_row, last_row, self.first_column, self.last_column)


def range_parse(text: str | None) -> CellRange | None:
    """Parse a range: "A4:E6" → CellRange(4, 6, 1, 5); None for anything else."""
    match = _RANGE.match((text or "").strip().upper())
    if not match:
        return None
    first_col, first_row, last_col, last_row = match.groups()
    last_col, last_row = last_col or first_col, last_row or first_row
    rows = sorted((int(first_row), int(last_row)))
    columns = sorted((column_index(first_col), column_index(last_col)))
    return CellRange(rows[0], rows[1], columns[0], columns[1])


def range_union(ranges: Iterable[str | None]) -> str | None:
    """The smallest range holding all of `ranges` ("A4:E4", "A6:E6" → "A4:E6")."""
    parsed = [r for r in (range_parse(text) for text in ranges) if r is not None]
    if not parsed:
        return None
    return str(
        CellRange(
            min(r.first_row for r in parsed),
            max(r.last_row for r in parsed),
            min(r.first_column for r in parsed),
            max(r.last_column for r in parsed),
        )
    )


def range_rows(cells: str | None) -> range | None:
    """The row numbers a range covers."""
    parsed = range_parse(cells)
    return parsed.rows() if parsed else None


# --- Values as a person reads them ---------------------------------------------------------


def value_text(value: object, number_format: str | None = None) -> str:
    """A cell's value as the spreadsheet shows it, on one line."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, dt.datetime):
        if (value.hour, value.minute, value.second) == (0, 0, 0):
            return _date_text(value.date())
        seconds = ":%S" if value.second else ""
        return f"{_date_text(value.date())} {value.strftime('%H:%M' + seconds)}"
    if isinstance(value, dt.date):
        return _date_text(value)
    if isinstance(value, dt.time):
        return value.strftime("%H:%M:%S" if value.second else "%H:%M")
    if isinstance(value, dt.timedelta):
        return _duration_text(value)
    if isinstance(value, (int, float)):
        return number_text(value, number_format)
    text = clean_inline(str(value))
    if len(text) > MAX_CELL_CHARS:
        text = text[: MAX_CELL_CHARS - 1].rstrip() + "…"
    return text


def _date_text(day: dt.date) -> str:
    return f"{day.day} {day.strftime('%B %Y')}"


def _duration_text(value: dt.timedelta) -> str:
    total = int(value.total_seconds())
    hours, rest = divmod(abs(total), 3600)
    minutes, seconds = divmod(rest, 60)
    sign = "-" if total < 0 else ""
    return f"{sign}{hours}:{minutes:02d}" + (f":{seconds:02d}" if seconds else "")


def number_text(value: float, number_format: str | None = None) -> str:
    """A number under its cell format: "0.00" → 2 decimals, "#,##0" → thousands separators,
    "0%" → percent, a currency sign where the format puts one; "General" → as typed (no
    binary noise: 0.1 + 0.2 reads 0.3)."""
    fmt = (number_format or "General").split(";")[0]
    # Quoted text and escapes are not placeholders ("0.0\" kg\"" has one decimal).
    bare = re.sub(r'"[^"]*"|\\.|\[[^\]]*\]', "", fmt)
    percent = "%" in bare
    number = float(value) * 100 if percent else value
    if fmt == "General" or not re.search(r"[0#?]", bare):
        if float(number).is_integer() and abs(number) < 1e15:
            text = str(int(number))
        else:
            text = format(float(number), ".10g")
    else:
        decimals = 0
        if "." in bare:
            decimals = len(re.match(r"[0#?]*", bare.split(".", 1)[1]).group())
        separator = "," if re.search(r"[0#?],[0#?]", bare) else ""
        text = format(float(number), f"{separator}.{decimals}f")
        if text.startswith("-") and float(text.replace(",", "")) == 0:
            text = text[1:]
    prefix, suffix = _format_literals(fmt)
    return f"{prefix}{text}{suffix}".strip()


_FORMAT_TOKEN = re.compile(
    r'"(?P<quoted>[^"]*)"|\\(?P<escaped>.)|\[\$(?P<currency>[^\]-]*)[^\]]*\]|\[[^\]]*\]'
    r"|[_*].|(?P<placeholder>[0#?])|(?P<literal>[^0#?.,])|[.,]"
)


def _format_literals(fmt: str) -> tuple[str, str]:
    """The text a number format puts before and after the number: quoted text ("GBP "),
    escaped characters, currency signs, percent, spaces. Colours, conditions and padding
    (`_)`, `*-`) are left out."""
    if fmt == "General" or "@" in fmt:  # "@": shown as text
        return "", ""
    prefix: list[str] = []
    suffix: list[str] = []
    seen_placeholder = False
    for token in _FORMAT_TOKEN.finditer(fmt):
        if token.group("placeholder"):
            seen_placeholder = True
            continue
        literal = next(
            (
                token.group(name)
                for name in ("quoted", "escaped", "currency", "literal")
                if token.group(name) is not None
            ),
            None,
        )
        if literal:
            (suffix if seen_placeholder else prefix).append(literal)
    return "".join(prefix), "".join(suffix)
