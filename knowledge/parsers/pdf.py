"""PDF (pypdf): each page's lines joined back into paragraphs; the page number is each
block's page. Lines are classified from the text alone (a PDF's text layer says nothing of
styles): a page's furniture (a running header or footer repeated on the pages, a page number)
is left out, and a heading line opens a section, as a heading does in the other formats
(docs/decisions/0030-pdf-headings-and-page-furniture.md). Pages without a text layer
(scanned) are rendered with pypdfium2 and read by OCR (knowledge/parsers/ocr.py), within the
document's OCR budget; a PDF mixing text pages and scanned pages reads both, in page
order."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from knowledge.parsers.base import (
    BlockBuilder,
    DocumentParseError,
    Headings,
    clean_inline,
    error_reason,
    lines_join,
)
from knowledge.parsers.ocr import OCR_DPI, OcrReader, ocr_shortfall


def parse_pdf(data: bytes, builder: BlockBuilder) -> str | None:
    """Add the blocks of `data` to `builder`; the document's own title, if it has one.
    Raises `DocumentParseError` on a file it cannot read."""
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
            f"Could not read the PDF: the file is damaged or not a PDF ({error_reason(exc)})."
        ) from exc
    scanned = [number for number, text in enumerate(pages, start=1) if not _has_text(text)]
    page_lines = pages_lines(pages)
    headings = Headings()
    if not scanned:
        for number, lines in enumerate(page_lines, start=1):
            _page_add(builder, lines, number, headings)
        return str(title) if title else None
    with _rendered(data) as render, OcrReader(builder=builder, total=len(scanned)) as ocr:
        for number in range(1, len(pages) + 1):
            if number in scanned:
                ocr.page_add(number, lambda number=number: render(number))
                continue
            _page_add(builder, page_lines[number - 1], number, headings)
    if not builder.blocks and (shortfall := ocr_shortfall(builder)):
        raise DocumentParseError(f"No text could be read from the scanned PDF: {shortfall}")
    return str(title) if title else None


def _has_text(page_text: str) -> bool:
    """A text layer worth reading: a letter or a digit (a scan's layer may be empty, or
    hold only spaces and line breaks)."""
    return any(character.isalnum() for character in page_text)


@contextmanager
def _rendered(data: bytes) -> Iterator[Callable[[int], object]]:
    """A function rendering page N (1-based) of the PDF `data` as a greyscale PIL image at
    OCR_DPI, for OCR; the PDF stays open inside the `with`."""
    import pypdfium2

    try:
        document = pypdfium2.PdfDocument(data)
    except Exception as exc:  # pdfium's own error on a file pypdf could read
        raise DocumentParseError(
            f"Could not render the PDF's scanned pages for OCR ({error_reason(exc)})."
        ) from exc

    def render(number: int):
        page = document[number - 1]
        try:
            return page.render(scale=OCR_DPI / 72, grayscale=True).to_pil()
        finally:
            page.close()

    try:
        yield render
    finally:
        document.close()


def _page_add(builder: BlockBuilder, lines: list[str], page: int, headings: Headings) -> None:
    """Add one page's paragraphs to `builder`; its heading lines update `headings` instead."""
    for kind, text in pdf_paragraphs(lines):
        if kind == "heading":
            headings.push(heading_level(text), text)
        else:
            builder.add(text, page=page, section=headings.path)


# A page number on a line of its own: "7", "Page 7", "Page 7 of 12", "7 / 12", "- 7 -".
_PAGE_NUMBER = re.compile(
    r"(?:page\s*)?\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?|[-–—]\s*\d{1,4}\s*[-–—]", re.IGNORECASE
)
_DIGITS = re.compile(r"\d+")
_EDGE_LINES = 2  # how many lines at a page's top and bottom may be furniture
# "4.1 Trains", "5. Meals and subsistence", "II. Scope": a numbered heading's number.
_HEADING_NUMBER = re.compile(r"(\d{1,2}(?:\.\d{1,2}){0,4})\.?\s+(?=\S)")
_HEADING_MAX_WORDS = 12
_SENTENCE_END = (".", "!", "?", ":", ".”", '."')
_NOT_A_HEADING_END = (*_SENTENCE_END, ";", ",")
_BULLET = re.compile(r"[-*•+▪–]\s")


def pages_lines(pages: list[str]) -> list[list[str]]:
    """Each page's lines (cleaned, blank lines kept as ""), its furniture left out: a line
    among the first or last `_EDGE_LINES` non-blank lines of a page that is a page number, or
    that repeats (digits aside) at the same edge of at least two pages and half of them."""
    cleaned = [[clean_inline(line) for line in text.splitlines()] for text in pages]
    edges: list[tuple[list[int], list[int]]] = []
    for lines in cleaned:
        filled = [index for index, line in enumerate(lines) if line]
        edges.append((filled[:_EDGE_LINES], filled[-_EDGE_LINES:]))
    counts: dict[tuple[str, str], int] = {}
    for lines, (top, bottom) in zip(cleaned, edges, strict=True):
        for edge, indexes in (("top", top), ("bottom", bottom)):
            for key in {(edge, _DIGITS.sub("#", lines[index])) for index in indexes}:
                counts[key] = counts.get(key, 0) + 1
    repeated = {key for key, count in counts.items() if count >= max(2, len(pages) / 2)}
    result: list[list[str]] = []
    for lines, (top, bottom) in zip(cleaned, edges, strict=True):
        furniture = {
            index
            for edge, indexes in (("top", top), ("bottom", bottom))
            for index in indexes
            if _PAGE_NUMBER.fullmatch(lines[index])
            or (edge, _DIGITS.sub("#", lines[index])) in repeated
        }
        result.append([line for index, line in enumerate(lines) if index not in furniture])
    return result


def is_heading_line(line: str, *, full: int) -> bool:
    """A line that opens a paragraph and reads as a heading: clearly shorter than the page's
    full lines (`full` characters), at most `_HEADING_MAX_WORDS` words, starting with a capital
    (after its number, if numbered), not a bullet, and not ending as a sentence or a clause
    does."""
    if len(line) >= 0.7 * full or line.endswith(_NOT_A_HEADING_END) or _BULLET.match(line):
        return False
    number = _HEADING_NUMBER.match(line)
    words = line[number.end() :] if number else line
    return words[:1].isupper() and len(words.split()) <= _HEADING_MAX_WORDS


def heading_level(heading: str) -> int:
    """A heading's level: 1 unnumbered, else one more than its number's parts ("5." 2, "4.1" 3),
    so a document's unnumbered title stays above its numbered sections."""
    number = _HEADING_NUMBER.match(heading)
    return 1 + len(number.group(1).split(".")) if number else 1


def pdf_paragraphs(lines: list[str]) -> Iterator[tuple[str, str]]:
    """A page's lines back into ("heading", text) and ("paragraph", text): a blank line, or a
        line clearly shorter than the page's full lines (a paragraph's last line), ends a
        paragraph; a line that `is_heading_line`, opening a paragraph or following a line that ends
    a sentence, is a heading (and ends the paragraph before it)."""
    full = max((len(line) for line in lines), default=0)
    current: list[str] = []
    for line in lines:
        if not line:
            if current:
                yield "paragraph", lines_join(current)
                current = []
            continue
        opens = not current or current[-1].endswith(_SENTENCE_END)
        if opens and is_heading_line(line, full=full):
            if current:
                yield "paragraph", lines_join(current)
                current = []
            yield "heading", line
            continue
        current.append(line)
        short = len(line) < 0.7 * full
        ends_sentence = line.endswith(_SENTENCE_END) and len(line) < 0.9 * full
        if short or ends_sentence:
            yield "paragraph", lines_join(current)
            current = []
    if current:
        yield "paragraph", lines_join(current)
