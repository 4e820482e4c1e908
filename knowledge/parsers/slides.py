"""PowerPoint decks (.pptx, python-pptx): the slide number is the page, the slide's title the
section.

Per slide, in the order of the slide's shapes (groups opened, top to bottom as PowerPoint
lists them): each paragraph of each text box as a block (bullet levels kept as a "- "
marker), each table row as "cell | cell", and the speaker notes last, as a paragraph starting
with "Notes:". The title placeholder itself is not repeated as a block: it is the section
every block of the slide carries (and what the model reads in front of each chunk). A slide
without a title gets "Slide N" as its section, so chunks never run from one slide into the
next. Hidden slides are read too.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from knowledge.parsers.archives import ooxml_title
from knowledge.parsers.base import (
    BlockBuilder,
    DocumentParseError,
    clean_inline,
    error_reason,
    table_row_text,
)


def parse_pptx(data: bytes, builder: BlockBuilder) -> str | None:
    from pptx import Presentation

    try:
        presentation = Presentation(io.BytesIO(data))
        slides = _slides(presentation)
        deck_title = clean_inline(ooxml_title(data) or "") or None
    except Exception as exc:  # zip, XML and package errors of many kinds on broken files
        raise DocumentParseError(
            "Could not read the presentation: the file is damaged or not a .pptx file "
            f"({error_reason(exc)})."
        ) from exc
    if slides and all(slide is None for slide in slides):
        raise DocumentParseError("Could not read the presentation: it has no readable slide.")
    first_title: str | None = None
    for number, slide in enumerate(slides, start=1):
        if slide is None:  # its part is missing: the other slides keep their numbers
            continue
        title_shape = slide.shapes.title
        title = clean_inline(title_shape.text_frame.text) if title_shape is not None else ""
        first_title = first_title or title or None
        section = title or f"Slide {number}"
        previous_row = False
        for text, is_row in _slide_texts(slide.shapes, skip=title_shape):
            builder.add(text, page=number, section=section, tight=is_row and previous_row)
            previous_row = is_row
        if slide.has_notes_slide:
            notes = clean_inline(slide.notes_slide.notes_text_frame.text or "")
            if notes:
                builder.add(f"Notes: {notes}", page=number, section=section)
    return deck_title or first_title


def _slides(presentation) -> list:
    """The deck's slides in order, None for one whose part the file lacks (the slide list
    names it, the package does not have it)."""
    slides = []
    slide_list = presentation._element.sldIdLst  # `presentation.slides` fails on a lack
    for slide_id in slide_list if slide_list is not None else ():
        try:
            slides.append(presentation.part.related_slide(slide_id.rId))
        except KeyError:
            slides.append(None)
    return slides


def _slide_texts(shapes, *, skip) -> Iterator[tuple[str, bool]]:
    """(text, is a table row) of the shapes, in order. Shapes are told apart by class and
    by what they have, never by `shape_type`, which python-pptx cannot give for shapes some
    writers lay out (a text shape without preset geometry raises NotImplementedError)."""
    from pptx.shapes.group import GroupShape

    for shape in shapes:
        if skip is not None and shape.shape_id == skip.shape_id:
            continue
        if isinstance(shape, GroupShape):
            yield from _slide_texts(shape.shapes, skip=None)
            continue
        if getattr(shape, "has_table", False) and shape.has_table:
            for row in shape.table.rows:
                text = table_row_text(cell.text for cell in row.cells)
                if text:
                    yield text, True
            continue
        if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            for paragraph in shape.text_frame.paragraphs:
                text = clean_inline("".join(run.text for run in paragraph.runs) or "")
                if not text:
                    text = clean_inline(paragraph.text or "")
                if text:
                    yield (f"- {text}" if paragraph.level > 0 else text), False
