"""Spreadsheets (.xlsx, .csv) as rows that read on their own.

Every row holding data becomes one block of text that names its sheet and, for each non-empty
cell, the column's header label:

    Stocks — Product code: QX-2207 · Product name: Brass valve 1/2in · Quantity in stock: 150

so a chunk of rows, or a single row quoted in an answer, needs no header row to be understood,
and full-text search finds the codes and names it holds. Each block keeps its sheet and the
cells it covers (`A4:E4`, from the sheet's first to its last used column); chunking keeps
those on the chunk (`sheet`, `cells`) and never lets a chunk run across an empty row, so the
rows of a chunk are consecutive and its lines are its rows, in order (`range_rows`).

How a sheet's rows become blocks is knowledge/parsers/sheets.py; cell references and values
as text are knowledge/parsers/cells.py. Reading, per sheet:
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
import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from knowledge.parsers.base import (
    BlockBuilder,
    DocumentParseError,
    clean_inline,
    decode_text,
    error_reason,
)
from knowledge.parsers.cells import number_text, range_parse, value_text
from knowledge.parsers.sheets import (
    MAX_LABEL_CHARS,
    MAX_SHEETS,
    Row,
    SheetInfo,
    _Budget,
    merge_fill,
    sheet_blocks,
)

CSV_DELIMITERS = ",;\t|"

_MERGE_REF = re.compile(rb"<(?:\w+:)?mergeCell\s[^>]*?ref=\"([A-Z]+\d+(?::[A-Z]+\d+)?)\"")


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
        rows=merge_fill(raw_rows(), merges, render),
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
