"""Turn a document's bytes into text blocks that remember where they came from.

Every parser returns a `ParsedDocument`: the extracted text and its blocks (paragraphs, list
items, table rows, code blocks), each with its page (PDF) or section (heading path such as
"Handbook > Leave > Annual leave" for Markdown, HTML and DOCX) and its character offsets
into the extracted text. Chunking never lets a chunk cross from one page or section to the
next, so these two fields are what citations point at.

Spreadsheet blocks (.xlsx, .csv; knowledge/spreadsheets.py) are rows, each with its `sheet`
and the `cells` it covers ("A4:E4"); slides (.pptx; knowledge/slides.py) have the slide
number as their page and the slide's title as their section.

Supported: .pdf, .md/.markdown, .html/.htm, .txt, .docx, .xlsx, .csv, .pptx. Anything else
is refused with an `UnsupportedFileType`; a corrupt or empty file raises a
`DocumentParseError` whose message is meant for the person who gave us the file.
"""

from __future__ import annotations

import io
import logging
import re
import textwrap
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

SUPPORTED_TYPES: dict[str, str] = {
    ".pdf": "application/pdf",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".txt": "text/plain",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".csv": "text/csv",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
}
SUPPORTED_TYPES_LABEL = ".pdf, .md/.markdown, .html/.htm, .txt, .docx, .xlsx, .csv, .pptx"
SECTION_SEPARATOR = " > "
logger = logging.getLogger(__name__)

# Control characters PostgreSQL cannot store (NUL) or that only add noise; \t and \n stay.
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0\u2000-\u200a\u202f\u205f\u3000]+")
_ZERO_WIDTH = re.compile(r"[\u200b\u200c\u200d\u2060\ufeff\u00ad]")


class DocumentParseError(Exception):
    """The file could not be turned into text; the message is shown to the user as is."""


class UnsupportedFileType(DocumentParseError):
    """The file's type is not one we can read."""


@dataclass(frozen=True)
class Block:
    """A run of text that belongs to exactly one page / section."""

    text: str
    page: int | None
    section: str | None
    char_start: int
    char_end: int
    sheet: str | None = None  # spreadsheets: the sheet the row is on
    cells: str | None = None  # spreadsheets: the cells the row covers, "A4:E4"


@dataclass(frozen=True)
class ParsedDocument:
    text: str  # the extracted text; every block's offsets point into it
    blocks: list[Block]
    title: str | None  # the document's own title or first heading, when it has one
    media_type: str
    metadata: dict = field(default_factory=dict)  # for Document.metadata (spreadsheets: sheets)


def file_type_check(name: str) -> str:
    """The media type for `name`'s extension, or `UnsupportedFileType` naming what is supported."""
    suffix = Path(name).suffix.lower()
    if suffix not in SUPPORTED_TYPES:
        shown = f"'{suffix}'" if suffix else "without an extension"
        raise UnsupportedFileType(
            f"Unsupported file type {shown} ({Path(name).name}). "
            f"Supported types: {SUPPORTED_TYPES_LABEL}."
        )
    return SUPPORTED_TYPES[suffix]


def is_supported(name: str) -> bool:
    return Path(name).suffix.lower() in SUPPORTED_TYPES


def document_parse(*, data: bytes, name: str) -> ParsedDocument:
    """Parse `data`, the bytes of a file called `name` (its extension picks the parser)."""
    media_type = file_type_check(name)
    if not data.strip():
        raise DocumentParseError(f"The file is empty ({Path(name).name}).")
    parser = _PARSERS[Path(name).suffix.lower()]
    builder = _BlockBuilder(name=Path(name).name)
    try:
        title = parser(data, builder)
    except DocumentParseError:
        raise
    except Exception as exc:  # a reader's own bug on odd input: that file fails, readably
        logger.exception("Parsing %s failed unexpectedly", name)
        raise DocumentParseError(
            f"Could not read {Path(name).name}: the file is damaged or in a form we cannot "
            f"read ({type(exc).__name__})."
        ) from exc
    if not builder.blocks:
        raise DocumentParseError(f"No text could be extracted from {Path(name).name}.")
    return ParsedDocument(
        text=builder.text(),
        blocks=builder.blocks,
        title=(_clean_inline(title)[:300] or None) if title else None,
        media_type=media_type,
        metadata=builder.metadata,
    )


# --- Text helpers ------------------------------------------------------------------------


def _clean_inline(text: str) -> str:
    """One line of prose: control characters gone, whitespace collapsed."""
    text = _ZERO_WIDTH.sub("", _CONTROL_CHARS.sub("", text))
    return " ".join(_SPACES.sub(" ", text.replace("\n", " ")).split())


def _clean_multiline(text: str, *, code: bool = False) -> str:
    """Text whose line breaks matter: plain text (spaces collapsed per line) or code
    (indentation kept, common indentation removed)."""
    text = _ZERO_WIDTH.sub("", _CONTROL_CHARS.sub("", text.replace("\r\n", "\n")))
    text = text.replace("\r", "\n")
    if code:
        lines = [line.replace("\u00a0", " ").rstrip() for line in text.split("\n")]
        return textwrap.dedent("\n".join(lines)).strip()
    lines = [_SPACES.sub(" ", line).rstrip() for line in text.split("\n")]
    return "\n".join(lines).strip()


def _reason(exc: Exception) -> str:
    """A short, single-line account of a library's exception for an error message."""
    detail = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


_WESTERN = {"cp1252", "latin_1", "iso8859_15"}
_WESTERN_TOLERANCE = 0.02


def _decode_text(data: bytes) -> str:
    """UTF-8 when it is UTF-8 (with or without BOM), else what charset-normalizer finds."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            pass
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    matches = list(from_bytes(data))
    if not matches:
        raise DocumentParseError("The file does not look like text (no known encoding fits).")
    best = matches[0]
    # Short Western European texts score almost the same in several 8-bit code pages
    # (café reads as well in cp1257 as in cp1252 to a statistical detector); when the
    # Western one is practically as good, it is by far the likelier origin.
    for match in matches:
        if match.chaos <= best.chaos + _WESTERN_TOLERANCE and _WESTERN & set(
            match.could_be_from_charset
        ):
            return str(match)
    return str(best)


@dataclass
class _BlockBuilder:
    """Collects blocks and lays them out in one text: blank line between blocks, a single
    newline between the rows of a list or a table."""

    blocks: list[Block] = field(default_factory=list)
    name: str = ""  # the file's name (a CSV's one sheet is named after it)
    metadata: dict = field(default_factory=dict)
    _parts: list[str] = field(default_factory=list)
    _length: int = 0

    def add(
        self,
        text: str,
        *,
        page: int | None = None,
        section: str | None = None,
        tight=False,
        sheet: str | None = None,
        cells: str | None = None,
    ) -> None:
        if not text:
            return
        if self._parts:
            joiner = "\n" if tight else "\n\n"
            self._parts.append(joiner)
            self._length += len(joiner)
        start = self._length
        self._parts.append(text)
        self._length += len(text)
        self.blocks.append(Block(text, page, section, start, self._length, sheet, cells))

    def text(self) -> str:
        return "".join(self._parts)


class _Headings:
    """The heading path: a new heading replaces those of its level and deeper."""

    def __init__(self) -> None:
        self._stack: list[tuple[int, str]] = []

    def push(self, level: int, text: str) -> None:
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        if text:
            self._stack.append((level, text))

    @property
    def path(self) -> str | None:
        if not self._stack:
            return None
        return SECTION_SEPARATOR.join(text for _, text in self._stack)[:1000]


# --- Markdown ----------------------------------------------------------------------------


def _parse_markdown(data: bytes, builder: _BlockBuilder) -> str | None:
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(_decode_text(data))
    headings = _Headings()
    title: str | None = None
    list_markers: list[str] = []  # "-" or "." for each open list
    item_marker: str | None = None  # the marker the next paragraph of a list item gets
    row: list[str] | None = None
    previous_tight = False  # the last block was a list item / table row

    for index, token in enumerate(tokens):
        kind = token.type
        if kind == "heading_open":
            text = _markdown_inline(tokens[index + 1])
            headings.push(int(token.tag[1]), text)
            title = title or text or None
            previous_tight = False
        elif kind in {"bullet_list_open", "ordered_list_open"}:
            list_markers.append(token.markup)
        elif kind in {"bullet_list_close", "ordered_list_close"}:
            list_markers.pop()
        elif kind == "list_item_open":
            item_marker = f"{token.info}{token.markup}" if token.info else "-"
        elif kind == "inline" and tokens[index - 1].type == "paragraph_open":
            text = _markdown_inline(token)
            tight = False
            if list_markers:
                tight = previous_tight
                if item_marker:
                    text = f"{item_marker} {text}"
                    item_marker = None
            builder.add(text, section=headings.path, tight=tight)
            previous_tight = bool(list_markers)
        elif kind == "tr_open":
            row = []
        elif kind == "inline" and row is not None:
            row.append(_markdown_inline(token))
        elif kind == "tr_close" and row is not None:
            builder.add(" | ".join(row), section=headings.path, tight=previous_tight)
            row = None
            previous_tight = True
        elif kind == "table_close":
            previous_tight = False
        elif kind in {"fence", "code_block"}:
            builder.add(_clean_multiline(token.content, code=True), section=headings.path)
            previous_tight = False
        elif kind == "html_block":
            builder.add(_html_fragment_text(token.content), section=headings.path)
            previous_tight = False
    return title


def _markdown_inline(token) -> str:
    parts: list[str] = []
    for child in token.children or []:
        if child.type in {"text", "text_special", "code_inline"}:
            parts.append(child.content)
        elif child.type in {"softbreak", "hardbreak"}:
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)
    return _clean_inline("".join(parts))


def _html_fragment_text(html: str) -> str:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "template", "noscript"]):
        tag.decompose()
    return _clean_inline(soup.get_text(" "))


# --- HTML --------------------------------------------------------------------------------

_HTML_DROP = ["script", "style", "nav", "noscript", "template", "svg", "iframe", "head", "title"]
# Elements that never hold others (BeautifulSoup's html.parser builder treats them so too).
_HTML_VOID = {
    "area", "base", "basefont", "bgsound", "br", "col", "command", "embed", "frame", "hr",
    "image", "img", "input", "isindex", "keygen", "link", "menuitem", "meta", "nextid",
    "param", "source", "spacer", "track", "wbr",
}  # fmt: skip
_HTML_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_HTML_BLOCKS = {
    "address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "dialog",
    "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hgroup",
    "hr", "html", "li", "main", "menu", "ol", "p", "section", "summary", "table", "tbody",
    "td", "tfoot", "th", "thead", "ul",
}  # fmt: skip


# Deeper than this, an HTML file is refused before it is parsed: nothing written by a person
# nests a thousand levels, and BeautifulSoup's tree building slows down with the depth.
HTML_MAX_DEPTH = 1000


class _TooDeep(Exception):
    pass


class _DepthProbe(HTMLParser):
    """Follows the open elements the way BeautifulSoup's html.parser tree builder nests
    them (void elements never open, an end tag closes up to its most recent start tag, a
    stray one is ignored) and stops at the first element deeper than `limit`."""

    def __init__(self, limit: int) -> None:
        super().__init__(convert_charrefs=False)
        self.limit = limit
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in _HTML_VOID:
            return
        self.open.append(tag)
        if len(self.open) > self.limit:
            raise _TooDeep

    def handle_startendtag(self, tag: str, attrs) -> None:
        pass  # <tag/>: opens nothing

    def handle_endtag(self, tag: str) -> None:
        for position in range(len(self.open) - 1, -1, -1):  # at most `limit` steps
            if self.open[position] == tag:
                del self.open[position:]
                return


def _html_depth_check(data: bytes) -> None:
    # Tags are ASCII in every encoding a web page may use but UTF-16/32, which latin-1 reads
    # without error (a UTF-16 page then shows no tags here and is simply not checked).
    probe = _DepthProbe(HTML_MAX_DEPTH)
    try:
        probe.feed(data.decode("latin-1"))
        probe.close()
    except _TooDeep:
        raise DocumentParseError(
            f"The HTML is nested too deeply to be read (more than {HTML_MAX_DEPTH} levels of "
            "elements inside each other)."
        ) from None


_FLUSH, _FLUSH_ROW = object(), object()  # markers of the walk: the end of a block / a row


def _parse_html(data: bytes, builder: _BlockBuilder) -> str | None:
    from bs4 import BeautifulSoup
    from bs4.element import Comment, Declaration, Doctype, NavigableString, ProcessingInstruction

    _html_depth_check(data)
    soup = BeautifulSoup(data, "html.parser")
    head_title = soup.title.get_text(" ") if soup.title else ""
    for tag in soup(_HTML_DROP):
        tag.decompose()
    skipped = (Comment, Declaration, Doctype, ProcessingInstruction)
    headings = _Headings()
    first_heading: list[str] = []
    buffer: list[str] = []
    last_was_row = [False]  # the last block was a list item or a table row

    # The elements holding a block or a heading somewhere inside, in one pass (asking each
    # element in turn would search the same subtrees again and again).
    holds_block: set[int] = set()
    for tag in soup.find_all(lambda t: t.name in _HTML_BLOCKS or t.name in _HTML_HEADINGS):
        parent = tag.parent
        while parent is not None and id(parent) not in holds_block:
            holds_block.add(id(parent))
            parent = parent.parent

    def flush(row: bool = False) -> None:
        text = _clean_inline("".join(buffer))
        buffer.clear()
        if text:
            builder.add(text, section=headings.path, tight=row and last_was_row[0])
            last_was_row[0] = row

    # Document order without recursion: a block's children go on the stack in front of the
    # marker that ends it.
    stack: list = list(reversed(soup.contents))
    while stack:
        child = stack.pop()
        if child is _FLUSH or child is _FLUSH_ROW:
            flush(row=child is _FLUSH_ROW)
            continue
        if isinstance(child, NavigableString):
            if not isinstance(child, skipped):
                buffer.append(str(child))
            continue
        name = child.name
        if name in _HTML_HEADINGS:
            flush()
            text = _clean_inline(child.get_text(" "))
            headings.push(_HTML_HEADINGS[name], text)
            last_was_row[0] = False
            if text and not first_heading:
                first_heading.append(text)
        elif name == "tr":
            flush()
            cells = [_clean_inline(cell.get_text(" ")) for cell in child.find_all(["td", "th"])]
            buffer.append(" | ".join(c for c in cells if c))
            flush(row=True)
        elif name == "pre":
            flush()
            builder.add(_clean_multiline(child.get_text(), code=True), section=headings.path)
            last_was_row[0] = False
        elif name == "br":
            buffer.append(" ")
        elif name == "li":
            flush()
            stack.append(_FLUSH_ROW)
            stack.extend(reversed(child.contents))
        elif name in _HTML_BLOCKS or id(child) in holds_block:
            flush()
            stack.append(_FLUSH)
            stack.extend(reversed(child.contents))
        else:
            buffer.append(child.get_text())

    flush()
    return first_heading[0] if first_heading else (_clean_inline(head_title) or None)


# --- Plain text --------------------------------------------------------------------------


def _parse_text(data: bytes, builder: _BlockBuilder) -> str | None:
    """Paragraphs split on blank lines. A paragraph that is one short line in capitals, or a
    line underlined with === / ---, is taken as a heading and opens a section."""
    if b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DocumentParseError("The file does not look like text (it contains binary data).")
    text = _clean_multiline(_decode_text(data))
    headings = _Headings()
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        lines = paragraph.split("\n")
        if len(lines) == 2 and _TEXT_UNDERLINE.match(lines[1]) and len(lines[0]) <= 100:
            headings.push(1 if lines[1].lstrip()[0] == "=" else 2, _clean_inline(lines[0]))
        elif len(lines) == 1 and _is_capitals_heading(paragraph):
            headings.push(1, _clean_inline(paragraph))
        else:
            builder.add(paragraph, section=headings.path)
    return None


_TEXT_UNDERLINE = re.compile(r"^\s*(?:={3,}|-{3,})\s*$")


def _is_capitals_heading(line: str) -> bool:
    letters = [c for c in line if c.isalpha()]
    return (
        len(line) <= 80
        and len(letters) >= 3
        and all(c.isupper() for c in letters)
        and not line.rstrip().endswith((".", "!", "?", ",", ";", ":"))
    )


# --- PDF ---------------------------------------------------------------------------------


def _parse_pdf(data: bytes, builder: _BlockBuilder) -> str | None:
    import logging

    from pypdf import PdfReader

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # malformed files are reported by us
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentParseError("The PDF is password protected.")
        pages = [page.extract_text() or "" for page in reader.pages]
        metadata = reader.metadata
        title = metadata.title if metadata is not None else None
    except DocumentParseError:
        raise
    except Exception as exc:  # pypdf raises many shapes of error on broken files
        raise DocumentParseError(
            f"Could not read the PDF: the file is damaged or not a PDF ({_reason(exc)})."
        ) from exc
    if not any(page.strip() for page in pages):
        raise DocumentParseError(
            "The PDF contains no extractable text (it may be a scanned image)."
        )
    for number, page_text in enumerate(pages, start=1):
        for paragraph in _pdf_paragraphs(page_text):
            builder.add(paragraph, page=number)
    return str(title) if title else None


def _pdf_paragraphs(page_text: str) -> Iterable[str]:
    """Lines back into paragraphs: a blank line, or a line clearly shorter than the page's
    full lines (a paragraph's last line, a heading), ends a paragraph."""
    lines = [_clean_inline(line) for line in page_text.splitlines()]
    full = max((len(line) for line in lines), default=0)
    current: list[str] = []
    for line in lines:
        if not line:
            if current:
                yield _join_pdf_lines(current)
                current = []
            continue
        current.append(line)
        short = len(line) < 0.7 * full
        ends_sentence = line.endswith((".", "!", "?", ":", ".”", '."')) and len(line) < 0.9 * full
        if short or ends_sentence:
            yield _join_pdf_lines(current)
            current = []
    if current:
        yield _join_pdf_lines(current)


def _join_pdf_lines(lines: list[str]) -> str:
    text = lines[0]
    for line in lines[1:]:
        # "well-" + "known" stays "well-known"; otherwise lines join with a space.
        if text.endswith("-") and not text.endswith(" -") and line[:1].islower():
            text += line
        else:
            text += " " + line
    return text


# --- DOCX --------------------------------------------------------------------------------

_DOCX_HEADING = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)


# A .docx is a zip. Its parts are checked by the sizes the zip declares before python-docx
# unpacks anything (Python's zipfile never inflates a member past its declared size): a few
# megabytes that would unpack to gigabytes (a "zip bomb") are refused. Word's own files
# unpack to a few times their size, pictures not at all.
DOCX_MAX_UNCOMPRESSED_BYTES = 256 * 1024 * 1024
DOCX_MAX_RATIO = 100  # uncompressed / compressed, for a part over DOCX_RATIO_FROM bytes
DOCX_RATIO_FROM = 10 * 1024 * 1024
DOCX_MAX_PARTS = 10_000


def _docx_size_check(data: bytes) -> None:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError) as exc:
        raise DocumentParseError(
            "Could not read the Word document: the file is damaged or not a .docx file "
            f"({_reason(exc)})."
        ) from exc
    if len(parts) > DOCX_MAX_PARTS:
        raise DocumentParseError(
            f"The Word document has too many parts ({len(parts):,}; the limit is "
            f"{DOCX_MAX_PARTS:,}): it is not a document Word wrote."
        )
    total = sum(part.file_size for part in parts)
    if total > DOCX_MAX_UNCOMPRESSED_BYTES:
        raise DocumentParseError(
            f"The Word document would unpack to {total / 2**20:,.0f} MB (the limit is "
            f"{DOCX_MAX_UNCOMPRESSED_BYTES // 2**20} MB): it looks like a zip bomb, not a "
            "document."
        )
    for part in parts:
        if part.file_size > DOCX_RATIO_FROM and part.file_size > DOCX_MAX_RATIO * max(
            part.compress_size, 1
        ):
            raise DocumentParseError(
                f"The Word document's part {part.filename} is compressed "
                f"{part.file_size // max(part.compress_size, 1):,} to 1 (the limit is "
                f"{DOCX_MAX_RATIO} to 1): it looks like a zip bomb, not a document."
            )


def _parse_docx(data: bytes, builder: _BlockBuilder) -> str | None:
    import docx
    from docx.table import Table

    _docx_size_check(data)
    try:
        document = docx.Document(io.BytesIO(data))
        items = list(document.iter_inner_content())
    except Exception as exc:  # zip, XML and package errors of many kinds on broken files
        raise DocumentParseError(
            "Could not read the Word document: the file is damaged or not a .docx file "
            f"({_reason(exc)})."
        ) from exc
    headings = _Headings()
    title = _clean_inline(document.core_properties.title or "") or None
    first_heading: str | None = None
    previous_row = False
    for item in items:
        if isinstance(item, Table):
            for row in _docx_rows(item):
                builder.add(row, section=headings.path, tight=previous_row)
                previous_row = True
            continue
        previous_row = False
        text = _clean_inline(item.text)
        level = _docx_heading_level(item)
        if level is not None:
            headings.push(level, text)
            first_heading = first_heading or text or None
        else:
            builder.add(text, section=headings.path)
    return title or first_heading


def _docx_heading_level(paragraph) -> int | None:
    try:
        name = (paragraph.style.name or "") if paragraph.style is not None else ""
    except (KeyError, ValueError):
        return None
    if name.lower() == "title":
        return 0
    match = _DOCX_HEADING.match(name.strip())
    return int(match.group(1)) if match else None


def _docx_rows(table) -> Iterable[str]:
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = _clean_inline(cell.text)
            if text and (not cells or cells[-1] != text):  # merged cells repeat themselves
                cells.append(text)
        if cells:
            yield " | ".join(cells)


def _parse_xlsx(data: bytes, builder: _BlockBuilder) -> str | None:
    from knowledge.spreadsheets import parse_xlsx

    return parse_xlsx(data, builder)


def _parse_csv(data: bytes, builder: _BlockBuilder) -> str | None:
    from knowledge.spreadsheets import parse_csv

    return parse_csv(data, builder)


def _parse_pptx(data: bytes, builder: _BlockBuilder) -> str | None:
    from knowledge.slides import parse_pptx

    return parse_pptx(data, builder)


_PARSERS: dict[str, Callable[[bytes, _BlockBuilder], str | None]] = {
    ".pdf": _parse_pdf,
    ".md": _parse_markdown,
    ".markdown": _parse_markdown,
    ".html": _parse_html,
    ".htm": _parse_html,
    ".txt": _parse_text,
    ".docx": _parse_docx,
    ".xlsx": _parse_xlsx,
    ".csv": _parse_csv,
    ".pptx": _parse_pptx,
}
