"""Word documents (.docx, python-docx): heading styles open sections; paragraphs and table
rows ("cell | cell") are blocks. The zip's declared sizes are checked against the DOCX_* limits
before python-docx unpacks anything."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Iterable

from knowledge.parsers.base import (
    DOCX_MAX_PARTS,
    DOCX_MAX_RATIO,
    DOCX_MAX_UNCOMPRESSED_BYTES,
    DOCX_RATIO_FROM,
    BlockBuilder,
    DocumentParseError,
    Headings,
    clean_inline,
    error_reason,
    table_row_text,
)

_DOCX_HEADING = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)


def _docx_size_check(
    data: bytes, *, what: str = "Word document", kind: str = "a .docx file"
) -> None:
    """Refuse a zip whose declared sizes are beyond the DOCX_* limits (a zip bomb) before
    anything is unpacked; `what` and `kind` name the format in the messages (the OpenDocument
    parsers use it too)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError) as exc:
        raise DocumentParseError(
            f"Could not read the {what}: the file is damaged or not {kind} ({error_reason(exc)})."
        ) from exc
    if len(parts) > DOCX_MAX_PARTS:
        raise DocumentParseError(
            f"The {what} has too many parts ({len(parts):,}; the limit is "
            f"{DOCX_MAX_PARTS:,}): it is not a document an office program wrote."
        )
    total = sum(part.file_size for part in parts)
    if total > DOCX_MAX_UNCOMPRESSED_BYTES:
        raise DocumentParseError(
            f"The {what} would unpack to {total / 2**20:,.0f} MB (the limit is "
            f"{DOCX_MAX_UNCOMPRESSED_BYTES // 2**20} MB): it looks like a zip bomb, not a "
            "document."
        )
    for part in parts:
        if part.file_size > DOCX_RATIO_FROM and part.file_size > DOCX_MAX_RATIO * max(
            part.compress_size, 1
        ):
            raise DocumentParseError(
                f"The {what}'s part {part.filename} is compressed "
                f"{part.file_size // max(part.compress_size, 1):,} to 1 (the limit is "
                f"{DOCX_MAX_RATIO} to 1): it looks like a zip bomb, not a document."
            )


def parse_docx(data: bytes, builder: BlockBuilder) -> str | None:
    """Add the blocks of `data` to `builder`; the document's own title, if it has one.
    Raises `DocumentParseError` on a file it cannot read."""
    import docx
    from docx.table import Table

    _docx_size_check(data)
    try:
        document = docx.Document(io.BytesIO(data))
        items = list(document.iter_inner_content())
    except Exception as exc:  # zip, XML and package errors of many kinds on broken files
        raise DocumentParseError(
            "Could not read the Word document: the file is damaged or not a .docx file "
            f"({error_reason(exc)})."
        ) from exc
    headings = Headings()
    title = clean_inline(document.core_properties.title or "") or None
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
