"""What every parser shares: the parse result (`ParsedDocument` of `Block`s), the
`BlockBuilder` that lays blocks out in one text, the heading path, the text cleaners and
decoder, the errors, and the HTML nesting limit. The limits of zip-based files are in
knowledge/parsers/archives.py."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

SECTION_SEPARATOR = " > "

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
    ocr_confidence: float | None = None  # read by OCR: its words' mean confidence, 0-100


@dataclass(frozen=True)
class ParsedDocument:
    text: str  # the extracted text; every block's offsets point into it
    blocks: list[Block]
    title: str | None  # the document's own title or first heading, when it has one
    media_type: str
    metadata: dict = field(default_factory=dict)  # for Document.metadata (spreadsheets: sheets)


# --- Text helpers ------------------------------------------------------------------------


def clean_inline(text: str) -> str:
    """One line of prose: control characters gone, whitespace collapsed."""
    text = _ZERO_WIDTH.sub("", _CONTROL_CHARS.sub("", text))
    return " ".join(_SPACES.sub(" ", text.replace("\n", " ")).split())


def clean_multiline(text: str, *, code: bool = False) -> str:
    """Text whose line breaks matter: plain text (spaces collapsed per line) or code
    (indentation kept, common indentation removed)."""
    text = _ZERO_WIDTH.sub("", _CONTROL_CHARS.sub("", text.replace("\r\n", "\n")))
    text = text.replace("\r", "\n")
    if code:
        lines = [line.replace("\u00a0", " ").rstrip() for line in text.split("\n")]
        return textwrap.dedent("\n".join(lines)).strip()
    lines = [_SPACES.sub(" ", line).rstrip() for line in text.split("\n")]
    return "\n".join(lines).strip()


def lines_join(lines: list[str]) -> str:
    """Lines of one paragraph (a PDF's, a scan's) joined with spaces; a word hyphenated at a
    line's end is joined back ("well-" + "known" stays "well-known")."""
    text = lines[0]
    for line in lines[1:]:
        if text.endswith("-") and not text.endswith(" -") and line[:1].islower():
            text += line
        else:
            text += " " + line
    return text


def table_row_text(cells: Iterable[str]) -> str:
    """A table row as "cell | cell": each cell cleaned, empty ones left out, and a cell equal
    to the one before it left out too (Word and PowerPoint repeat a merged cell's text in each
    cell it covers). Empty when no cell holds text."""
    kept: list[str] = []
    for cell in cells:
        text = clean_inline(cell)
        if text and (not kept or kept[-1] != text):
            kept.append(text)
    return " | ".join(kept)


def error_reason(exc: Exception) -> str:
    """A short, single-line account of a library's exception for an error message."""
    detail = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


_WESTERN = {"cp1252", "latin_1", "iso8859_15"}
_WESTERN_TOLERANCE = 0.02


def decode_text(data: bytes) -> str:
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
class BlockBuilder:
    """Collects blocks and lays them out in one text: blank line between blocks, a single
    newline between the rows of a list or a table."""

    blocks: list[Block] = field(default_factory=list)
    name: str = ""  # the file's name (a CSV's one sheet is named after it)
    metadata: dict = field(default_factory=dict)
    # Told what a slow parser is doing ("OCR: page 3 of 10"; "" when done), for the admin.
    progress: Callable[[str], None] | None = None
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
        ocr_confidence: float | None = None,
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
        self.blocks.append(
            Block(text, page, section, start, self._length, sheet, cells, ocr_confidence)
        )

    def text(self) -> str:
        return "".join(self._parts)


class Headings:
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


# --- Limits ------------------------------------------------------------------------------

# Deeper than this, an HTML file is refused before it is parsed: nothing written by a person
# nests a thousand levels, and BeautifulSoup's tree building slows down with the depth.
HTML_MAX_DEPTH = 1000
