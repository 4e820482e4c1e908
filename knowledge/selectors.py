"""Reads of the knowledge base for pages: a spreadsheet's rows laid out as tables again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from knowledge.models import Chunk, Document
from knowledge.spreadsheets import (
    CELL_SEPARATOR,
    LABEL_SEPARATOR,
    ROW_PREFIX_SEPARATOR,
    range_parse,
)


@dataclass(frozen=True)
class SheetRow:
    number: int  # the row's number in the sheet
    cells: tuple[str, ...] | None  # a value per column; None: shown whole (a caption)
    text: str  # the row as stored, without the sheet's name
    chunk_id: int
    anchor: str = ""  # the element id a citation link scrolls to
    highlighted: bool = False


@dataclass
class SheetTable:
    name: str
    hidden: bool
    columns: list[str]  # letters
    labels: list[str]
    rows: list[SheetRow] = field(default_factory=list)

    @property
    def width(self) -> int:
        return max(len(self.labels), 1)


def row_cells(text: str, labels: Sequence[str]) -> tuple[str, ...] | None:
    """The value of each column in a row's text ("Code: QX-2207 · Name: Brass valve"), in
    the order of `labels`; None when the text is not such a row (a caption)."""
    values = [""] * len(labels)
    position, found = 0, False
    index = 0
    while index < len(labels):
        label = labels[index]
        head = f"{label}{LABEL_SEPARATOR}"
        if not text.startswith(head, position):
            index += 1
            continue
        start = position + len(head)
        # The value runs to the next " · <later label>: ", the earliest of them.
        end, next_index = len(text), len(labels)
        for later in range(index + 1, len(labels)):
            at = text.find(f"{CELL_SEPARATOR}{labels[later]}{LABEL_SEPARATOR}", start)
            if at != -1 and at < end:
                end, next_index = at, later
        values[index] = text[start:end]
        found = True
        position = end + len(CELL_SEPARATOR)
        index = next_index
    if not found or position < len(text):
        return None
    return tuple(values)


def document_sheet_tables(
    *, document: Document, chunks: Sequence[Chunk], highlighted: int | None, cells: str = ""
) -> list[SheetTable]:
    """The spreadsheet rows of `chunks` (in order) as one table per sheet, the rows of the
    `highlighted` chunk marked (only those within `cells` when given). Each chunk's first row
    (for the highlighted chunk, its first highlighted row) carries the chunk's anchor
    "chunk-<id>". Empty when the chunks are not a spreadsheet's."""
    described = {
        sheet.get("name"): sheet
        for sheet in (document.metadata or {}).get("sheets", [])
        if isinstance(sheet, dict)
    }
    wanted = range_parse(cells) if cells else None
    tables: dict[str, SheetTable] = {}
    for chunk in chunks:
        if not chunk.sheet:
            continue
        table = tables.get(chunk.sheet)
        if table is None:
            info = described.get(chunk.sheet, {})
            table = tables[chunk.sheet] = SheetTable(
                name=chunk.sheet,
                hidden=bool(info.get("hidden")),
                columns=[str(c) for c in info.get("columns", [])],
                labels=[str(label) for label in info.get("labels", [])],
            )
        span = range_parse(chunk.cells)
        first = span.first_row if span else 0
        prefix = f"{chunk.sheet}{ROW_PREFIX_SEPARATOR}"
        anchored = False
        for offset, line in enumerate(chunk.text.split("\n")):
            number = first + offset
            text = line.removeprefix(prefix)
            lit = chunk.pk == highlighted and (
                wanted is None or wanted.first_row <= number <= wanted.last_row
            )
            anchor = ""
            if not anchored and (lit or (chunk.pk != highlighted and offset == 0)):
                anchor, anchored = f"chunk-{chunk.pk}", True
            table.rows.append(
                SheetRow(
                    number=number,
                    cells=row_cells(text, table.labels) if table.labels else None,
                    text=text,
                    chunk_id=chunk.pk,
                    anchor=anchor,
                    highlighted=lit,
                )
            )
        if chunk.pk == highlighted and not anchored and table.rows:  # cells outside the chunk
            index = len(table.rows) - chunk.text.count("\n") - 1
            row = table.rows[index]
            table.rows[index] = SheetRow(
                row.number, row.cells, row.text, row.chunk_id, f"chunk-{chunk.pk}", True
            )
    return list(tables.values())
