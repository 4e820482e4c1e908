"""Word documents (.docx, python-docx): heading styles open sections; paragraphs and table
rows ("cell | cell") are blocks. The zip's declared sizes were checked before this parser runs
(knowledge/parsers/archives.py)."""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Iterator

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


_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
# Inside a paragraph: text left out (deleted, moved away, field codes, the fallback copy of
# a drawing) and properties, which hold no text.
_SKIPPED = {
    f"{_W}del",
    f"{_W}moveFrom",
    f"{_W}delText",
    f"{_W}instrText",
    f"{_W}pPr",
    f"{_W}rPr",
    f"{_MC}Fallback",
}
_CHARACTERS = {f"{_W}tab": " ", f"{_W}ptab": " ", f"{_W}br": " ", f"{_W}cr": " "}
_CHARACTERS[f"{_W}noBreakHyphen"] = "-"


def parse_docx(data: bytes, builder: BlockBuilder) -> str | None:
    """Add the blocks of `data` to `builder`; the document's own title, if it has one.
    Raises `DocumentParseError` on a file it cannot read.

    The body is read in document order with what other writers wrap it in: block content
    controls (a template's fields; a table of contents is left out), tracked insertions (as
    accepted; deletions left out), inline content controls, hyperlinks and fields; a text
    box's paragraphs follow the paragraph that anchors it."""
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    try:
        document = docx.Document(io.BytesIO(data))
        body = document._body
        items = [
            Table(element, body) if element.tag == f"{_W}tbl" else Paragraph(element, body)
            for element in _body_elements(document.element.body)
        ]
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
        text = clean_inline(_paragraph_text(item._p))
        level = _docx_heading_level(item)
        if level is not None:
            headings.push(level, text)
            first_heading = first_heading or text or None
        else:
            builder.add(text, section=headings.path)
        for box in _text_boxes(item._p):
            builder.add(clean_inline(_paragraph_text(box)), section=headings.path)
    return title or first_heading


def _body_elements(container) -> Iterator:
    """The `w:p` and `w:tbl` elements of the body, in order, opening block content controls
    (but a table of contents) and custom XML."""
    for element in container:
        if element.tag in (f"{_W}p", f"{_W}tbl"):
            yield element
        elif element.tag == f"{_W}sdt":
            gallery = element.find(f"{_W}sdtPr/{_W}docPartObj/{_W}docPartGallery")
            if gallery is not None and "contents" in (gallery.get(f"{_W}val") or "").lower():
                continue
            content = element.find(f"{_W}sdtContent")
            if content is not None:
                yield from _body_elements(content)
        elif element.tag == f"{_W}customXml":
            yield from _body_elements(element)


def _paragraph_text(paragraph) -> str:
    """A `w:p`'s text as Word shows it with changes accepted: its runs wherever they are
    wrapped (insertions, content controls, hyperlinks, fields, smart tags), without deleted
    text, field codes or the paragraphs of its text boxes."""
    parts: list[str] = []

    def walk(element) -> None:
        for child in element:
            tag = child.tag
            if tag in _SKIPPED or tag == f"{_W}txbxContent":
                continue
            if tag == f"{_W}t":
                parts.append(child.text or "")
            elif tag in _CHARACTERS:
                parts.append(_CHARACTERS[tag])
            else:
                walk(child)

    walk(paragraph)
    return "".join(parts)


def _text_boxes(paragraph) -> Iterator:
    """The paragraphs of the text boxes a `w:p` anchors (the drawing's copy, not the
    fallback's)."""
    for box in paragraph.iter(f"{_W}txbxContent"):
        # A box in a box is read with the outer box's paragraphs.
        if any(a.tag in (f"{_MC}Fallback", f"{_W}txbxContent") for a in box.iterancestors()):
            continue
        yield from box.iter(f"{_W}p")


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
        text = table_row_text(
            " ".join(_paragraph_text(p) for p in cell._tc.iter(f"{_W}p")) for cell in row.cells
        )
        if text:
            yield text
