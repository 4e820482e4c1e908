"""OpenDocument text (.odt) and spreadsheets (.ods), the formats of LibreOffice and of many
public administrations, read like their Office counterparts.

- .odt (knowledge/parsers/docx.py's counterpart): headings (`text:h`, and paragraphs in the
  "Title" style) open sections, paragraphs, list items and table rows ("cell | cell") are
  blocks; when the document has page breaks (LibreOffice writes `text:soft-page-break`
  where its layout ended a page, and a paragraph style with `fo:break-before="page"` or
  `fo:break-after="page"` for a page break the author put in), each block also has its
  page.
- .ods (knowledge/parsers/spreadsheets.py's counterpart): every row holding data is a block
  naming its sheet and the header label of each cell, with its sheet and cell range, through
  the same `sheet_blocks` (knowledge/parsers/sheets.py) and within the same budgets
  (settings.SPREADSHEET_MAX_ROWS and SPREADSHEET_MAX_CELLS) as .xlsx. Values are read as the
  file shows them (the text LibreOffice wrote for each cell: its number format applied),
  dates as "15 March 2026", booleans TRUE / FALSE; merged cells fill each cell they cover;
  hidden sheets are marked.

Both are zips: their declared sizes are checked before anything is unpacked (by
`document_parse`, with `archives.zip_check`, as for every zip-based format), and their XML is
read with
entities and network access off. A spreadsheet's rows are streamed: LibreOffice pads a sheet
with `table:number-rows-repeated="1048000"` empty rows and `number-columns-repeated` empty
cells; repeats are expanded lazily (an empty run only moves the row or column counter), so
a sheet ends at its last non-empty cell, and a repeated non-empty row or cell is counted
against the budgets before it is expanded.
"""

from __future__ import annotations

import datetime as dt
import io
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass

from knowledge.parsers.base import (
    BlockBuilder,
    DocumentParseError,
    Headings,
    clean_inline,
    error_reason,
    table_row_text,
)
from knowledge.parsers.cells import CellRange, value_text
from knowledge.parsers.sheets import (
    MAX_LABEL_CHARS,
    MAX_SHEETS,
    Row,
    _Budget,
    sheet_blocks,
)

OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
STYLE = "urn:oasis:names:tc:opendocument:xmlns:style:1.0"
FO = "urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
DC = "http://purl.org/dc/elements/1.1/"

# A spreadsheet has at most this many columns (LibreOffice's limit is 16,384).
MAX_COLUMNS = 16_384


def _q(namespace: str, name: str) -> str:
    return f"{{{namespace}}}{name}"


def _archive(data: bytes, kind: str) -> zipfile.ZipFile:
    label = {"odt": "OpenDocument text", "ods": "OpenDocument spreadsheet"}[kind]
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        archive.getinfo("content.xml")
    except (KeyError, zipfile.BadZipFile, ValueError, OSError) as exc:
        raise DocumentParseError(
            f"Could not read the {label}: the file is damaged or not an .{kind} file "
            f"({error_reason(exc)})."
        ) from exc
    return archive


def _parser():
    from lxml import etree

    return etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)


def _title(archive: zipfile.ZipFile) -> str | None:
    """The document's own title (meta.xml's dc:title), if it has one."""
    from lxml import etree

    try:
        with archive.open("meta.xml") as source:
            root = etree.parse(source, _parser()).getroot()
    except (KeyError, etree.XMLSyntaxError, OSError):
        return None
    title = root.find(f".//{_q(DC, 'title')}")
    return clean_inline(title.text or "") or None if title is not None else None


# Elements of an .odt body whose children are read as if they stood in its place.
_ODT_CONTAINERS = frozenset(
    _q(namespace, name)
    for namespace, name in [
        (TEXT, "list"),
        (TEXT, "list-item"),
        (TEXT, "list-header"),
        (TEXT, "section"),
        (TEXT, "index-body"),
        (TABLE, "table-rows"),
    ]
)
# Parts of an .ods content.xml freed once read.
_ODS_DONE_WITH = frozenset({_q(OFFICE, "automatic-styles"), _q(OFFICE, "font-face-decls")})


# --- .odt ----------------------------------------------------------------------------------


def parse_odt(data: bytes, builder: BlockBuilder) -> str | None:
    """Add the blocks of the OpenDocument text `data` to `builder`; the document's own title
    (else its first heading). Raises `DocumentParseError` on a file it cannot read."""
    from lxml import etree

    archive = _archive(data, "odt")
    try:
        with archive.open("content.xml") as source:
            root = etree.parse(source, _parser()).getroot()
    except (etree.XMLSyntaxError, OSError, zipfile.BadZipFile) as exc:
        raise DocumentParseError(
            f"Could not read the OpenDocument text: the file is damaged ({error_reason(exc)})."
        ) from exc
    body = root.find(f"{_q(OFFICE, 'body')}/{_q(OFFICE, 'text')}")
    if body is None:
        raise DocumentParseError(
            "Could not read the OpenDocument text: it holds no text body (is it an .odt file?)."
        )
    styles = _paragraph_styles(root)
    paged = bool(styles.break_before or styles.break_after) or _has_page_breaks(body)
    reader = _OdtReader(builder, styles, paged=paged)
    reader.walk(body)
    return _title(archive) or reader.first_heading


@dataclass
class _ParagraphStyles:
    """What the automatic paragraph styles say: which are the title, which break the page."""

    title: set[str]
    break_before: set[str]
    break_after: set[str]


def _paragraph_styles(root) -> _ParagraphStyles:
    styles = _ParagraphStyles(title={"Title"}, break_before=set(), break_after=set())
    automatic = root.find(_q(OFFICE, "automatic-styles"))
    if automatic is None:
        return styles
    for style in automatic.iter(_q(STYLE, "style")):
        name = style.get(_q(STYLE, "name")) or ""
        if style.get(_q(STYLE, "parent-style-name")) == "Title":
            styles.title.add(name)
        properties = style.find(_q(STYLE, "paragraph-properties"))
        if properties is not None:
            if properties.get(_q(FO, "break-before")) == "page":
                styles.break_before.add(name)
            if properties.get(_q(FO, "break-after")) == "page":
                styles.break_after.add(name)
    return styles


def _has_page_breaks(body) -> bool:
    return next(body.iter(_q(TEXT, "soft-page-break")), None) is not None


class _OdtReader:
    """Walks an .odt body in document order, adding blocks with their section and page."""

    def __init__(self, builder: BlockBuilder, styles: _ParagraphStyles, *, paged: bool) -> None:
        self.builder = builder
        self.styles = styles
        self.headings = Headings()
        self.first_heading: str | None = None
        self.page: int | None = 1 if paged else None
        self.previous_row = False

    def add(self, text: str, *, row: bool = False) -> None:
        if not text:
            return
        self.builder.add(
            text, page=self.page, section=self.headings.path, tight=row and self.previous_row
        )
        self.previous_row = row

    def walk(self, element) -> None:
        for child in element:
            tag = child.tag
            if tag == _q(TEXT, "soft-page-break"):
                if self.page is not None:
                    self.page += 1
            elif tag == _q(TEXT, "h"):
                self.page_break_before(child)
                level = int(child.get(_q(TEXT, "outline-level")) or 1)
                text = clean_inline(_inline_text(child))
                self.headings.push(level, text)
                self.first_heading = self.first_heading or text or None
                self.previous_row = False
                self.page_breaks_inside(child)
            elif tag == _q(TEXT, "p"):
                self.page_break_before(child)
                text = clean_inline(_inline_text(child))
                if child.get(_q(TEXT, "style-name")) in self.styles.title and text:
                    self.headings.push(0, text)
                    self.first_heading = self.first_heading or text
                else:
                    self.add(text)
                self.page_breaks_inside(child)
            elif tag == _q(TABLE, "table"):
                self.table(child)
            elif tag in _ODT_CONTAINERS:
                self.walk(child)

    def page_break_before(self, paragraph) -> None:
        """A paragraph whose style starts it on a new page (not the document's first)."""
        style = paragraph.get(_q(TEXT, "style-name"))
        if self.page is not None and style in self.styles.break_before and self.builder.blocks:
            self.page += 1

    def page_breaks_inside(self, paragraph) -> None:
        """After a paragraph: a page that ends inside it or right after it (its style's
        break-after) puts what follows on the next page; the paragraph is on the page it
        starts on."""
        if self.page is not None:
            self.page += sum(1 for _ in paragraph.iter(_q(TEXT, "soft-page-break")))
            if paragraph.get(_q(TEXT, "style-name")) in self.styles.break_after:
                self.page += 1

    def table(self, table) -> None:
        for row in table.iter(_q(TABLE, "table-row")):
            if row.getparent() is not None and _enclosing_table(row) is not table:
                continue  # a nested table's rows are read as the text of its cell
            cells = [
                " ".join(clean_inline(_inline_text(p)) for p in cell.iter(_q(TEXT, "p")))
                for cell in row
                if cell.tag == _q(TABLE, "table-cell")
            ]
            self.add(table_row_text(cells), row=True)
        self.previous_row = False


def _enclosing_table(element):
    parent = element.getparent()
    while parent is not None and parent.tag != _q(TABLE, "table"):
        parent = parent.getparent()
    return parent


def _inline_text(element) -> str:
    """The text of a paragraph as it reads: spans and links opened, `text:s` as its spaces,
    tabs and line breaks as spaces; notes and annotations left out."""
    parts: list[str] = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag == _q(TEXT, "s"):
            parts.append(" " * min(int(child.get(_q(TEXT, "c")) or 1), 100))
        elif tag in (_q(TEXT, "tab"), _q(TEXT, "line-break")):
            parts.append(" ")
        elif tag in (_q(TEXT, "note"), _q(OFFICE, "annotation"), _q(TEXT, "soft-page-break")):
            pass
        else:
            parts.append(_inline_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


# --- .ods ----------------------------------------------------------------------------------


@dataclass
class _Sheet:
    name: str
    hidden: bool


def parse_ods(data: bytes, builder: BlockBuilder) -> str | None:
    """An OpenDocument spreadsheet, sheet by sheet in workbook order (see the module's
    docstring). Raises `DocumentParseError` on a file it cannot read or over the budgets."""
    archive = _archive(data, "ods")
    budget = _Budget.from_settings()
    sheets: list[dict] = []
    try:
        for sheet, rows, merges in _ods_sheets(archive):
            if len(sheets) >= MAX_SHEETS:
                raise DocumentParseError(
                    f"The spreadsheet has more than {MAX_SHEETS} sheets; at most {MAX_SHEETS} "
                    "are read."
                )
            info = sheet_blocks(
                name=sheet.name,
                rows=rows,
                merges=merges,
                builder=builder,
                budget=budget,
                hidden=sheet.hidden,
            )
            for _ in rows:  # the rest of a sheet holding only its header: consumed
                pass
            if info is not None:
                sheets.append(info.as_dict())
    except DocumentParseError:
        raise
    except Exception as exc:  # lxml's XMLSyntaxError and zip errors while streaming
        raise DocumentParseError(
            f"Could not read the spreadsheet: the file is damaged ({error_reason(exc)})."
        ) from exc
    builder.metadata["sheets"] = sheets
    return _title(archive) or builder.name or None


def _ods_sheets(
    archive: zipfile.ZipFile,
) -> Iterator[tuple[_Sheet, Iterator[Row], list[CellRange]]]:
    """Each sheet of the spreadsheet with its rows, streamed from content.xml. A sheet's rows
    must be consumed before the next sheet is asked for. `merges` fills up as the rows are
    read (a merge is known from its top-left cell on)."""
    from lxml import etree

    hidden_styles: set[str] = set()
    with archive.open("content.xml") as source:
        events = etree.iterparse(
            source,
            events=("start", "end"),
            resolve_entities=False,
            no_network=True,
            huge_tree=False,
        )
        for event, element in events:
            if event == "end" and element.tag == _q(STYLE, "style"):
                properties = element.find(_q(STYLE, "table-properties"))
                if properties is not None and properties.get(_q(TABLE, "display")) == "false":
                    hidden_styles.add(element.get(_q(STYLE, "name")) or "")
            elif event == "start" and element.tag == _q(TABLE, "table"):
                if _enclosing_table(element) is not None:
                    continue  # a table inside a cell (a shape's text): not a sheet
                name = clean_inline(element.get(_q(TABLE, "name")) or "")[:MAX_LABEL_CHARS]
                sheet = _Sheet(
                    name=name or "Sheet",
                    hidden=element.get(_q(TABLE, "style-name")) in hidden_styles,
                )
                merges: list[CellRange] = []
                yield sheet, _ods_rows(events, element, merges), merges
            elif event == "end" and element.tag in _ODS_DONE_WITH:
                element.clear()


def _ods_rows(events, table, merges: list[CellRange]) -> Iterator[Row]:
    """The rows of `table` holding data, read from the parse `events` up to the table's end:
    (row number, {column: text}), merged cells filled, repeats expanded lazily."""
    number = 0
    filled: dict[int, dict[int, str]] = {}  # row → {column: value} from merges above it
    for event, element in events:
        if event == "end" and element is table:
            table.clear()
            return
        if event != "end" or element.tag != _q(TABLE, "table-row"):
            continue
        if _enclosing_table(element) is not table:
            continue
        repeat = _count(element.get(_q(TABLE, "number-rows-repeated")))
        cells = _ods_cells(element, number + 1, merges, filled)
        element.clear()
        while element.getprevious() is not None:  # rows read: dropped from the tree
            del element.getparent()[0]
        if not cells and not any(number < other <= number + repeat for other in filled):
            number += repeat  # empty rows, however many: only the counter moves
            continue
        for _ in range(repeat):
            number += 1
            row = {**filled.pop(number, {}), **cells}
            if row:
                yield number, row


def _ods_cells(
    row, number: int, merges: list[CellRange], filled: dict[int, dict[int, str]]
) -> dict[int, str]:
    """The non-empty cells of one row element: {column: text}; a merge's value recorded in
    `filled` for the rows below it and in the row for the columns beside it."""
    cells: dict[int, str] = {}
    column = 0
    for cell in row:
        if cell.tag not in (_q(TABLE, "table-cell"), _q(TABLE, "covered-table-cell")):
            continue
        repeat = _count(cell.get(_q(TABLE, "number-columns-repeated")))
        text = _cell_text(cell) if cell.tag == _q(TABLE, "table-cell") else ""
        if not text:
            column += repeat  # empty cells, however many: only the counter moves
            continue
        if column + repeat > MAX_COLUMNS:
            raise DocumentParseError(
                f"The spreadsheet has a row wider than {MAX_COLUMNS:,} columns: it is not a "
                "sheet a spreadsheet program wrote."
            )
        for _ in range(repeat):
            column += 1
            cells[column] = text
            across = _count(cell.get(_q(TABLE, "number-columns-spanned")))
            down = _count(cell.get(_q(TABLE, "number-rows-spanned")))
            if across > 1 or down > 1:
                merged = CellRange(number, number + down - 1, column, column + across - 1)
                merges.append(merged)
                for other in merged.rows():
                    for spanned in range(merged.first_column, merged.last_column + 1):
                        if other == number:
                            cells.setdefault(spanned, text)
                        else:
                            filled.setdefault(other, {}).setdefault(spanned, text)
    return cells


def _count(value: str | None) -> int:
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


def _cell_text(cell) -> str:
    """A cell's value as the sheet shows it: dates "15 March 2026", booleans TRUE / FALSE,
    anything else the text LibreOffice wrote for it (its number format applied)."""
    kind = cell.get(_q(OFFICE, "value-type"))
    if kind == "date":
        value = cell.get(_q(OFFICE, "date-value")) or ""
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return value_text(parsed.date() if "T" not in value else parsed)
    if kind == "boolean":
        return value_text(cell.get(_q(OFFICE, "boolean-value")) == "true")
    paragraphs = [
        clean_inline(_inline_text(p)) for p in cell if p.tag in (_q(TEXT, "p"), _q(TEXT, "h"))
    ]
    return value_text(" ".join(p for p in paragraphs if p))
