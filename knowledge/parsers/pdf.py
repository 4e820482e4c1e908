"""PDF (pypdf): each page's lines joined back into paragraphs; the page number is each
block's page."""

from __future__ import annotations

import io
from collections.abc import Iterable

from knowledge.parsers.base import BlockBuilder, DocumentParseError, clean_inline, error_reason


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
    pages = ["" if isinstance(page, Exception) else page for page in pages]
    if not any(page.strip() for page in pages):
        raise DocumentParseError(
            "The PDF contains no extractable text (it may be a scanned image)."
        )
    for number, page_text in enumerate(pages, start=1):
        for paragraph in _pdf_paragraphs(page_text):
            builder.add(paragraph, page=number)
    return str(title) if title else None


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
