"""Spreadsheets (.xlsx, .csv) as rows that read on their own.

Every row holding data becomes one block of text that names its sheet and, for each non-empty
cell, the column's header label:

    Stocks — Product code: QX-2207 · Product name: Brass valve 1/2in · Quantity in stock: 150

so a chunk of rows, or a single row quoted in an answer, needs no header row to be understood,
and full-text search finds the codes and names it holds. Each block keeps its sheet and the
cells it covers (`A4:E4`, from the sheet's first to its last used column); chunking keeps
those on the chunk (`sheet`, `cells`) and never lets a chunk run across an empty row, so the
rows of a chunk are consecutive and its lines are its rows, in order (`range_rows`).

Reading, per sheet:
- values as the file last showed them: an .xlsx is opened read-only with the cached results
  of formulas (never the formulas), numbers follow their cell format (decimals, thousands
  separators, percent, currency sign), dates read "15 March 2026", booleans TRUE / FALSE;
- the header row is the first row with two or more values among the sheet's first ten
  non-empty rows (else its first row); single-value rows above it are captions, kept as rows
  of their own. A header cell merged across columns labels each of them, and when the row
  under such a header fills those columns it is a second header row ("Price" over "EUR" and
  "USD" gives "Price EUR", "Price USD"). A data cell merged over several rows or columns
  counts in each of them;
- empty rows and empty sheets are skipped; hidden sheets are read like the others and marked
  as hidden in the document's metadata (`sheets`, which the document view uses to lay the
  rows out as a table again);
- a .csv file is one sheet named after the file (as a spreadsheet program names it), its
  encoding detected like plain text's (UTF-8, else charset-normalizer: cp1252 with "€"), its
  delimiter sniffed among , ; tab and |.

Any writer's .xlsx is read as openpyxl reads it (shared or inline strings, absolute part
paths, no styles part, sheets without a dimension, `str`/`e`/`d` cells, 1904 dates).

Limits: settings.SPREADSHEET_MAX_ROWS rows holding data and settings.SPREADSHEET_MAX_CELLS
non-empty cells per file, checked while streaming, and the unpacked size of an .xlsx, checked
before it is opened (knowledge/parsers/archives.py), so a huge or malicious file fails at
once with a readable error instead of holding a worker for minutes.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from django.conf import settings

from knowledge.parsers.base import (
    BlockBuilder,
    DocumentParseError,
    clean_inline,
    decode_text,
    error_reason,
)

ROW_PREFIX_SEPARATOR = " — "  # between the sheet's name and the row's cells
CELL_SEPARATOR = " · "  # between "label: value" pairs
LABEL_SEPARATOR = ": "
HEADER_SEARCH_ROWS = 10  # the header row is looked for among a sheet's first non-empty rows
MAX_SHEETS = 500
MAX_LABEL_CHARS = 120
MAX_CELL_CHARS = 2000  # a longer cell is cut (with "…"): a row must stay readable
CSV_DELIMITERS = ",;\t|"

_RANGE = re.compile(r"^([A-Z]{1,3})(\d+)(?::([A-Z]{1,3})(\d+))?$")
_MERGE_REF = re.compile(rb"<(?:\w+:)?mergeCell\s[^>]*?ref=\"([A-Z]+\d+(?::[A-Z]+\d+)?)\"")


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


# --- Limits --------------------------------------------------------------------------------


@dataclass
class _Budget:
    """Rows and cells read so far in one file, against the limits."""

    max_rows: int
    max_cells: int
    rows: int = 0
    cells: int = 0

    @classmethod
    def from_settings(cls) -> _Budget:
        return cls(max_rows=settings.SPREADSHEET_MAX_ROWS, max_cells=settings.SPREADSHEET_MAX_CELLS)

    def take(self, cells: int) -> None:
        self.rows += 1
        self.cells += cells
        if self.rows > self.max_rows:
            raise DocumentParseError(
                f"The spreadsheet is too large: it has more than {self.max_rows:,} rows with "
                "data (the limit per file). Split it into smaller files."
            )
        if self.cells > self.max_cells:
            raise DocumentParseError(
                f"The spreadsheet is too large: it has more than {self.max_cells:,} filled "
                "cells (the limit per file). Split it into smaller files."
            )


# --- Sheets into rows of text --------------------------------------------------------------

Row = tuple[int, dict[int, str]]  # (row number, {column number: text}) of non-empty cells


@dataclass
class SheetInfo:
    """What the document view needs to lay a sheet's rows out as a table again."""

    name: str
    hidden: bool = False
    columns: list[str] = field(default_factory=list)  # column letters, first to last
    labels: list[str] = field(default_factory=list)  # the header label of each column
    header: str | None = None  # the header row(s), as a range
    rows: int = 0  # rows holding data (captions included)

    def as_dict(self) -> dict:
        return {
            "name": self.name,
            "hidden": self.hidden,
            "columns": self.columns,
            "labels": self.labels,
            "header": self.header,
            "rows": self.rows,
        }


def _merge_fill(
    rows: Iterator[tuple[int, dict[int, object]]],
    merges: list[CellRange],
    render: Callable[[object], str],
) -> Iterator[Row]:
    """Rows with their values rendered as text; a merged range's value fills each of its
    cells (its top-left cell holds it and comes first)."""
    anchors: dict[CellRange, str] = {}
    by_row: dict[int, list[CellRange]] = {}
    for merged in merges:
        for number in merged.rows():
            by_row.setdefault(number, []).append(merged)
    for number, raw in rows:
        cells = {column: render(value) for column, value in raw.items()}
        cells = {column: text for column, text in cells.items() if text}
        for merged in by_row.get(number, ()):
            if number == merged.first_row:
                anchors[merged] = cells.get(merged.first_column, "")
            value = anchors.get(merged, "")
            if value:
                for column in range(merged.first_column, merged.last_column + 1):
                    cells.setdefault(column, value)
        if cells:
            yield number, cells


def _header_labels(
    header: Row, sub_header: Row | None, first_column: int, last_column: int
) -> list[str]:
    """One distinct label per column: the header's text (with the second header row's under
    it), "Column F" where the header is empty."""
    labels: list[str] = []
    seen: set[str] = set()
    for column in range(first_column, last_column + 1):
        parts = [header[1].get(column, "")]
        if sub_header is not None:
            parts.append(sub_header[1].get(column, ""))
        words = [part for i, part in enumerate(parts) if part and part not in parts[:i]]
        label = " ".join(words)[:MAX_LABEL_CHARS] or f"Column {column_letter(column)}"
        if label in seen:
            label = f"{label} ({column_letter(column)})"
        seen.add(label)
        labels.append(label)
    return labels


def _is_sub_header(header: Row, candidate: Row, merges: list[CellRange]) -> bool:
    """The row under a header whose cells merge across columns, filling those columns."""
    spans = [
        m
        for m in merges
        if m.first_row <= header[0] <= m.last_row and m.last_column > m.first_column
    ]
    if not spans or candidate[0] != header[0] + 1:
        return False
    under = [
        column for m in spans for column in range(m.first_column, m.last_column + 1)
    ]  # fmt: skip
    return sum(column in candidate[1] for column in under) >= 2


def sheet_blocks(
    *,
    name: str,
    rows: Iterator[Row],
    merges: list[CellRange],
    builder: BlockBuilder,
    budget: _Budget,
    hidden: bool = False,
) -> SheetInfo | None:
    """Add the sheet's rows to `builder` as blocks (sheet and cells set); None for a sheet
    without data."""
    info = SheetInfo(name=name, hidden=hidden)
    head: list[Row] = []
    for row in rows:
        budget.take(len(row[1]))
        head.append(row)
        if len(head) >= HEADER_SEARCH_ROWS:
            break
    if not head:
        return None
    # Two different values: a caption merged across the columns repeats one value.
    header_at = next((i for i, row in enumerate(head) if len(set(row[1].values())) >= 2), 0)
    header = head[header_at]
    rest = head[header_at + 1 :]
    sub_header = None
    if rest and _is_sub_header(header, rest[0], merges):
        sub_header, rest = rest[0], rest[1:]
    used = [column for row in head for column in row[1]]
    first_column, last_column = min(used), max(used)
    labels = _header_labels(header, sub_header, first_column, last_column)
    info.header = cell_range(
        header[0], (sub_header or header)[0], min(header[1]), max(header[1])
    )  # fmt: skip

    prefix = f"{name}{ROW_PREFIX_SEPARATOR}"
    previous: int | None = None

    def add(number: int, text: str, columns: Iterable[int]) -> None:
        nonlocal previous, first_column, last_column
        columns = list(columns)
        first_column = min(first_column, *columns)
        last_column = max(last_column, *columns)
        builder.add(
            prefix + text,
            sheet=name,
            cells=cell_range(number, number, first_column, last_column),
            tight=previous is not None and number == previous + 1,
        )
        previous = number
        info.rows += 1

    for number, cells in head[:header_at]:  # captions above the header (merged: once)
        add(number, CELL_SEPARATOR.join(dict.fromkeys(cells[c] for c in sorted(cells))), cells)

    def data_rows() -> Iterator[Row]:
        yield from rest
        for row in rows:
            budget.take(len(row[1]))
            yield row

    any_data = False
    for number, cells in data_rows():
        any_data = True
        pairs = []
        for column in sorted(cells):
            if first_column <= column < first_column + len(labels):
                label = labels[column - first_column]
            else:
                label = f"Column {column_letter(column)}"
            pairs.append(f"{label}{LABEL_SEPARATOR}{cells[column]}")
        add(number, CELL_SEPARATOR.join(pairs), cells)
    if not any_data:  # only a header: the header itself is what the sheet says
        row = sub_header or header
        add(row[0], CELL_SEPARATOR.join(labels), row[1])

    while len(labels) < last_column - first_column + 1:  # data beyond the header's columns
        labels.append(f"Column {column_letter(first_column + len(labels))}")
    info.columns = [column_letter(c) for c in range(first_column, last_column + 1)]
    info.labels = labels
    return info


# --- .xlsx ---------------------------------------------------------------------------------


def parse_xlsx(data: bytes, builder: BlockBuilder) -> str | None:
    """An Excel workbook, sheet by sheet in workbook order. Raises `DocumentParseError` on a
    file openpyxl cannot open, a damaged sheet, or one over the limits. The zip's declared
    sizes were checked before (knowledge/parsers/archives.py)."""
    import warnings

    from openpyxl import load_workbook

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # openpyxl warns about styles it does not know
            workbook = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # zip, XML and schema errors of many kinds on broken files
        raise DocumentParseError(
            "Could not read the spreadsheet: the file is damaged or not an .xlsx file "
            f"({error_reason(exc)})."
        ) from exc
    budget = _Budget.from_settings()
    sheets: list[dict] = []
    try:
        worksheets = [ws for ws in workbook.worksheets if hasattr(ws, "_worksheet_path")]
        if len(worksheets) > MAX_SHEETS:
            raise DocumentParseError(
                f"The spreadsheet has {len(worksheets)} sheets; at most {MAX_SHEETS} are read."
            )
        number_formats = _NumberFormats(workbook)
        for worksheet in worksheets:
            info = _xlsx_sheet(worksheet, builder, budget, number_formats)
            if info is not None:
                sheets.append(info.as_dict())
        title = workbook.properties.title if workbook.properties is not None else None
    except DocumentParseError:
        raise
    except Exception as exc:  # malformed sheet XML surfaces while streaming its rows
        raise DocumentParseError(
            f"Could not read the spreadsheet: the file is damaged ({error_reason(exc)})."
        ) from exc
    finally:
        workbook.close()
    builder.metadata["sheets"] = sheets
    return clean_inline(title or "") or builder.name or None


class _NumberFormats:
    """A cell's number format by its style index, as openpyxl's `ReadOnlyCell.number_format`
    reads it, but "General" where the workbook has no such style (a file written without a
    styles part, or with fewer styles than its cells name) instead of an IndexError."""

    def __init__(self, workbook) -> None:
        self._styles = getattr(workbook, "_cell_styles", None) or []
        self._custom = getattr(workbook, "_number_formats", None) or []
        self._known: dict[int, str] = {}

    def __call__(self, style_id: int) -> str:
        if style_id not in self._known:
            self._known[style_id] = self._lookup(style_id)
        return self._known[style_id]

    def _lookup(self, style_id: int) -> str:
        from openpyxl.styles.numbers import BUILTIN_FORMATS, BUILTIN_FORMATS_MAX_SIZE

        try:
            format_id = self._styles[style_id].numFmtId
            if format_id < BUILTIN_FORMATS_MAX_SIZE:
                return BUILTIN_FORMATS.get(format_id, "General")
            return self._custom[format_id - BUILTIN_FORMATS_MAX_SIZE] or "General"
        except (IndexError, TypeError, AttributeError):
            return "General"


def _xlsx_sheet(
    worksheet, builder: BlockBuilder, budget: _Budget, number_formats: _NumberFormats
) -> SheetInfo | None:
    """One sheet's rows, streamed: openpyxl's read-only sheet parser reads the sheet's XML
    with the inputs openpyxl's own read-only sheets give it (the workbook's shared strings,
    the part the workbook points to, its epoch and date formats), without the empty cells
    its public API pads every row with."""
    from openpyxl.worksheet._reader import WorkSheetParser

    # openpyxl's read-only sheets do not expose merged cells (they follow the rows in the
    # file): read their references from the sheet's XML first.
    with worksheet._get_source() as source:
        merges = [
            merged
            for ref in _merge_refs(source)
            if (merged := range_parse(ref.decode())) is not None
        ]
    workbook = worksheet.parent

    def raw_rows() -> Iterator[tuple[int, dict[int, object]]]:
        with worksheet._get_source() as source:
            parser = WorkSheetParser(
                source,
                worksheet._shared_strings,
                data_only=True,
                epoch=workbook.epoch,
                date_formats=workbook._date_formats,
                timedelta_formats=workbook._timedelta_formats,
            )
            for number, cells in parser.parse():
                values: dict[int, object] = {}
                for cell in cells:
                    value = cell["value"]
                    if value is None or (isinstance(value, str) and not value.strip()):
                        continue
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        value = (value, number_formats(cell.get("style_id") or 0))
                    values[cell["column"]] = value
                yield number, values

    def render(value: object) -> str:
        if isinstance(value, tuple):
            return number_text(*value)
        return value_text(value)

    return sheet_blocks(
        name=clean_inline(worksheet.title)[:MAX_LABEL_CHARS] or "Sheet",
        rows=_merge_fill(raw_rows(), merges, render),
        merges=merges,
        builder=builder,
        budget=budget,
        hidden=worksheet.sheet_state != "visible",
    )


def _merge_refs(source: IO[bytes]) -> list[bytes]:
    """The `ref` of every <mergeCell> of a sheet part (`source`, open), read in pieces
    (merges follow the sheet's data, which may be large)."""
    found: list[bytes] = []
    tail = b""
    while piece := source.read(1 << 20):
        window = tail + piece
        found.extend(match.group(1) for match in _MERGE_REF.finditer(window))
        tail = window[-200:]  # a tag cut in two is whole in the next window
    return list(dict.fromkeys(found))


# --- .csv ----------------------------------------------------------------------------------


def parse_csv(data: bytes, builder: BlockBuilder) -> str | None:
    """A CSV file: one sheet named after the file."""
    if b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DocumentParseError("The file does not look like CSV text (it has binary data).")
    text = decode_text(data)
    dialect = _csv_dialect(text)
    name = Path(builder.name).stem if builder.name else "Sheet"
    name = clean_inline(name)[:MAX_LABEL_CHARS] or "Sheet"

    def rows() -> Iterator[Row]:
        reader = csv.reader(io.StringIO(text, newline=""), dialect)
        try:
            for number, values in enumerate(reader, start=1):
                cells = {
                    column: rendered
                    for column, value in enumerate(values, start=1)
                    if (rendered := value_text(value))
                }
                if cells:
                    yield number, cells
        except csv.Error as exc:
            raise DocumentParseError(f"Could not read the CSV file ({error_reason(exc)}).") from exc

    info = sheet_blocks(
        name=name, rows=rows(), merges=[], builder=builder, budget=_Budget.from_settings()
    )
    builder.metadata["sheets"] = [info.as_dict()] if info is not None else []
    return builder.name or None


def _csv_dialect(text: str) -> type[csv.Dialect] | csv.Dialect:
    """The CSV dialect: Python's sniffer on the first lines, else the delimiter that splits
    those lines most consistently, else a comma."""
    head = text[: 64 * 1024]
    sample = "\n".join(head.splitlines()[:50])
    try:
        dialect = csv.Sniffer().sniff(sample, delimiters=CSV_DELIMITERS)
        if dialect.delimiter in CSV_DELIMITERS:
            return dialect
    except csv.Error:
        pass
    lines = [line for line in sample.splitlines() if line.strip()]
    best, best_score = ",", 0.0
    for delimiter in CSV_DELIMITERS:
        counts = [line.count(delimiter) for line in lines]
        if not counts or not max(counts):
            continue
        consistent = sum(count == counts[0] for count in counts) / len(counts)
        score = consistent * (counts[0] > 0) + 0.001 * counts[0]
        if score > best_score:
            best, best_score = delimiter, score

    class Detected(csv.excel):
        delimiter = best

    return Detected
