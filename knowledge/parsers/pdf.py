"""PDF (pypdf): each page's lines joined back into paragraphs; the page number is each
block's page. Lines are classified from the text alone (a PDF's text layer says nothing of
styles): a page number on a line of its own at a page's top or bottom is left out, and a
heading line is a paragraph of its own, never the end of the paragraph before it
(docs/decisions/0030-pdf-heading-lines-and-page-numbers.md). Pages without a text layer
(scanned) are rendered with pypdfium2 and read by OCR (knowledge/parsers/ocr.py), within the
document's OCR budget; a PDF mixing text pages and scanned pages reads both, in page order.
A page is rendered at OCR_DPI, or at the resolution its size allows under settings.OCR_MAX_PIXELS;
a page too large to be rendered at OCR_MIN_DPI under it is left unread, said why
(docs/decisions/0145-bounds-before-allocation.md)."""

from __future__ import annotations

import io
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from knowledge.parsers.base import (
    BlockBuilder,
    DocumentParseError,
    clean_inline,
    error_reason,
    lines_join,
)
from knowledge.parsers.ocr import OCR_DPI, OCR_MIN_DPI, OcrReader, PageTooLarge, ocr_shortfall


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
        pages = [_page_text(page) for page in reader.pages]
        metadata = reader.metadata
        title = metadata.title if metadata is not None else None
    except DocumentParseError:
        raise
    except Exception as exc:  # pypdf raises many shapes of error on broken files
        raise DocumentParseError(
            f"Could not read the PDF: the file is damaged or not a PDF ({error_reason(exc)})."
        ) from exc
    failures = [page for page in pages if isinstance(page, Exception)]
    if pages and len(failures) == len(pages):
        raise DocumentParseError(
            "Could not read the PDF: the file is damaged or not a PDF "
            f"({error_reason(failures[0])})."
        ) from failures[0]
    # A page pypdf could not read is left out (not rendered for OCR either: its content is what
    # failed); the others are read.
    failed = {number for number, page in enumerate(pages, start=1) if isinstance(page, Exception)}
    pages = ["" if isinstance(page, Exception) else page for page in pages]
    scanned = [
        number
        for number, text in enumerate(pages, start=1)
        if number not in failed and not _has_text(text)
    ]
    page_lines = pages_lines(pages)
    if not scanned:
        for number, lines in enumerate(page_lines, start=1):
            for paragraph in pdf_paragraphs(lines):
                builder.add(paragraph, page=number)
        return str(title) if title else None
    with _rendered(data) as render, OcrReader(builder=builder, total=len(scanned)) as ocr:
        for number in range(1, len(pages) + 1):
            if number in scanned:
                ocr.page_add(number, lambda number=number: render(number))
                continue
            for paragraph in pdf_paragraphs(page_lines[number - 1]):
                builder.add(paragraph, page=number)
    if not builder.blocks and (shortfall := ocr_shortfall(builder)):
        raise DocumentParseError(f"No text could be read from the scanned PDF: {shortfall}")
    return str(title) if title else None


def _has_text(page_text: str) -> bool:
    """A text layer worth reading: a letter or a digit (a scan's layer may be empty, or
    hold only spaces and line breaks)."""
    return any(character.isalnum() for character in page_text)


@contextmanager
def _rendered(data: bytes) -> Iterator[Callable[[int], object]]:
    """A function rendering page N (1-based) of the PDF `data` as a greyscale PIL image for
    OCR, at `render_scale` (OCR_DPI or less, within settings.OCR_MAX_PIXELS); it raises
    `PageTooLarge` for a page too large for that. The PDF stays open inside the `with`."""
    import pypdfium2
    from django.conf import settings

    try:
        document = pypdfium2.PdfDocument(data)
    except Exception as exc:  # pdfium's own error on a file pypdf could read
        raise DocumentParseError(
            f"Could not render the PDF's scanned pages for OCR ({error_reason(exc)})."
        ) from exc

    def render(number: int):
        page = document[number - 1]
        try:
            width, height = page.get_size()
            scale = render_scale(width, height, settings.OCR_MAX_PIXELS, number=number)
            return page.render(scale=scale, grayscale=True).to_pil()
        finally:
            page.close()

    try:
        yield render
    finally:
        document.close()


def render_scale(width: float, height: float, max_pixels: int, *, number: int) -> float:
    """Pixels per point to render a page of `width` × `height` points: OCR_DPI / 72, less when
    that would pass `max_pixels`. Raises `PageTooLarge` (page `number`) when even OCR_MIN_DPI
    would, or the page has no area."""
    area = width * height
    if not area > 0:
        raise PageTooLarge(f"page {number} has no size ({width:g} × {height:g} pt)")
    scale = min(OCR_DPI / 72, (max_pixels / area) ** 0.5)
    if scale * 72 < OCR_MIN_DPI:
        raise PageTooLarge(
            f"page {number} is too large to read by OCR ({width / 72 * 2.54:,.0f} × "
            f"{height / 72 * 2.54:,.0f} cm; at most {max_pixels / 1e6:g} megapixels at "
            f"{OCR_MIN_DPI} dpi)"
        )
    return scale


def _page_text(page) -> str | Exception:
    """A page's text, or the error pypdf raised on it: one page it cannot read (a font or
    content stream some producer wrote oddly) must not lose the document's other pages."""
    try:
        return page.extract_text() or ""
    except Exception as exc:  # pypdf raises many shapes of error on odd pages
        return exc


# A page number on a line of its own: "7", "Page 7", "Page 7 of 12", "7 / 12", "- 7 -".
_PAGE_NUMBER = re.compile(
    r"(?:page\s*)?\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?|[-–—]\s*\d{1,4}\s*[-–—]", re.IGNORECASE
)
_EDGE_LINES = 2  # how many lines at a page's top and bottom may be its page number
# "4.1 Trains", "5. Meals and subsistence": a numbered heading's number.
_HEADING_NUMBER = re.compile(r"(\d{1,2}(?:\.\d{1,2}){0,4})\.?\s+(?=\S)")
_HEADING_MAX_WORDS = 12
_SENTENCE_END = (".", "!", "?", ":", ".”", '."')
_NOT_A_HEADING_END = (*_SENTENCE_END, ";", ",")
_BULLET = re.compile(r"[-*•+▪–]\s")


def pages_lines(pages: list[str]) -> list[list[str]]:
    """Each page's lines (cleaned, blank lines kept as ""), its page number left out: a line
    among the first or last `_EDGE_LINES` non-blank lines of the page that is only a page
    number ("7", "Page 7 of 12", "- 7 -")."""
    result: list[list[str]] = []
    for text in pages:
        lines = [clean_inline(line) for line in text.splitlines()]
        filled = [index for index, line in enumerate(lines) if line]
        edges = set(filled[:_EDGE_LINES] + filled[-_EDGE_LINES:])
        result.append(
            [
                line
                for index, line in enumerate(lines)
                if index not in edges or not _PAGE_NUMBER.fullmatch(line)
            ]
        )
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


def pdf_paragraphs(lines: list[str]) -> Iterator[str]:
    """A page's lines back into paragraphs: a blank line, or a line clearly shorter than the
    page's full lines (a paragraph's last line), ends a paragraph; a line that
    `is_heading_line`, opening a paragraph or following a line that ends a sentence, is a
    paragraph of its own."""
    full = max((len(line) for line in lines), default=0)
    current: list[str] = []
    for line in lines:
        if not line:
            if current:
                yield lines_join(current)
                current = []
            continue
        opens = not current or current[-1].endswith(_SENTENCE_END)
        if opens and is_heading_line(line, full=full):
            if current:
                yield lines_join(current)
                current = []
            yield line
            continue
        current.append(line)
        short = len(line) < 0.7 * full
        ends_sentence = line.endswith(_SENTENCE_END) and len(line) < 0.9 * full
        if short or ends_sentence:
            yield lines_join(current)
            current = []
    if current:
        yield lines_join(current)
