"""PDF (pypdf): each page's lines joined back into paragraphs; the page number is each
block's page. Pages without a text layer (scanned) are rendered with pypdfium2 and read by
OCR (knowledge/parsers/ocr.py), within the document's OCR budget; a PDF mixing text pages
and scanned pages reads both, in page order."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from knowledge.parsers.base import (
    BlockBuilder,
    DocumentParseError,
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
    if not scanned:
        for number, page_text in enumerate(pages, start=1):
            for paragraph in _pdf_paragraphs(page_text):
                builder.add(paragraph, page=number)
        return str(title) if title else None
    with _rendered(data) as render, OcrReader(builder=builder, total=len(scanned)) as ocr:
        for number, page_text in enumerate(pages, start=1):
            if number in scanned:
                ocr.page_add(number, lambda number=number: render(number))
                continue
            for paragraph in _pdf_paragraphs(page_text):
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


def _page_text(page) -> str | Exception:
    """A page's text, or the error pypdf raised on it: one page it cannot read (a font or
    content stream some producer wrote oddly) must not lose the document's other pages."""
    try:
        return page.extract_text() or ""
    except Exception as exc:  # pypdf raises many shapes of error on odd pages
        return exc


def _pdf_paragraphs(page_text: str) -> Iterable[str]:
    """Lines back into paragraphs: a blank line, or a line clearly shorter than the page's
    full lines (a paragraph's last line, a heading), ends a paragraph."""
    lines = [clean_inline(line) for line in page_text.splitlines()]
    full = max((len(line) for line in lines), default=0)
    current: list[str] = []
    for line in lines:
        if not line:
            if current:
                yield lines_join(current)
                current = []
            continue
        current.append(line)
        short = len(line) < 0.7 * full
        ends_sentence = line.endswith((".", "!", "?", ":", ".”", '."')) and len(line) < 0.9 * full
        if short or ends_sentence:
            yield lines_join(current)
            current = []
    if current:
        yield lines_join(current)
