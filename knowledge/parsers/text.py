"""Plain text: paragraphs split on blank lines; a short line in capitals, or a line underlined
with === / ---, is a heading."""

from __future__ import annotations

import re

from knowledge.parsers.base import (
    BlockBuilder,
    DocumentParseError,
    Headings,
    clean_inline,
    clean_multiline,
    decode_text,
)


def parse_text(data: bytes, builder: BlockBuilder) -> str | None:
    """Paragraphs split on blank lines. A paragraph that is one short line in capitals, or a
    line underlined with === / ---, is taken as a heading and opens a section."""
    if b"\x00" in data[:4096] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DocumentParseError("The file does not look like text (it contains binary data).")
    text = clean_multiline(decode_text(data))
    headings = Headings()
    for paragraph in re.split(r"\n\s*\n", text):
        paragraph = paragraph.strip()
        lines = paragraph.split("\n")
        if len(lines) == 2 and _TEXT_UNDERLINE.match(lines[1]) and len(lines[0]) <= 100:
            headings.push(1 if lines[1].lstrip()[0] == "=" else 2, clean_inline(lines[0]))
        elif len(lines) == 1 and _is_capitals_heading(paragraph):
            headings.push(1, clean_inline(paragraph))
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
