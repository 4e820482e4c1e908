"""Word documents (.docx, python-docx): heading styles open sections; paragraphs and table
rows ("cell | cell") are blocks. The zip's declared sizes were checked before this parser runs
(knowledge/parsers/archives.py)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable

from knowledge.parsers.archives import ooxml_title
from knowledge.parsers.base import (
    BlockBuilder,
    DocumentParseError,
    Headings,
    clean_inline,
    error_reason,
    table_row_text,
)

_DOCX_HEADING = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)


def parse_docx(data: bytes, builder: BlockBuilder) -> str | None:
    """Add the blocks of `data` to `builder`; the document's own title, if it has one.
    Raises `DocumentParseError` on a file it cannot read."""
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
        items = list(document.iter_inner_content())
    except Exception as exc:  # zip, XML and package errors of many kinds on broken files
        raise DocumentParseError(
            "Could not read the Word document: the file is damaged or not a .docx file "
            f"({error_reason(exc)})."
        ) from exc
    headings = Headings()
    title = clean_inline(ooxml_title(data) or "") or None
    first_heading: str | None = None
    previous_row = False
    for item in items:
        if isinstance(item, Table):
            for row in _docx_rows(item):
                builder.add(row, section=headings.path, tight=previous_row)
                previous_row = True
            continue
        previous_row = False
        text = clean_inline(item.text)
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
        text = table_row_text(cell.text for cell in row.cells)
        if text:
            yield text
