"""A sheet's rows as blocks of text that read on their own, whatever file they come from.

Each row holding data becomes one block naming its sheet and, for each non-empty cell, the
column's header label ("Stocks — Product code: QX-2207 · Quantity in stock: 150"), with the
cells it covers. The header row is found among the sheet's first non-empty rows, merged header
cells label each of their columns (and a filled row under them is a second header row), merged
data cells count in each of their cells. Rows and cells are counted against the per-file limits
(`_Budget`) as they stream.

Used by the .xlsx and .csv readers (knowledge/parsers/spreadsheets.py, whose docstring tells
the rules in full) and the .ods reader (knowledge/parsers/opendocument.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from django.conf import settings

from knowledge.parsers.base import BlockBuilder, DocumentParseError
from knowledge.parsers.cells import CellRange, cell_range, column_letter

ROW_PREFIX_SEPARATOR = " — "  # between the sheet's name and the row's cells
CELL_SEPARATOR = " · "  # between "label: value" pairs
LABEL_SEPARATOR = ": "
HEADER_SEARCH_ROWS = 10  # the header row is looked for among a sheet's first non-empty rows
MAX_SHEETS = 500
MAX_LABEL_CHARS = 120


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


def merge_fill(
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
