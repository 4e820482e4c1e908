"""Markdown (CommonMark with tables, markdown-it-py): headings open sections; paragraphs,
list items (their marker kept), table rows ("cell | cell"), code blocks and HTML blocks are
blocks."""

from __future__ import annotations

from knowledge.parsers.base import (
    BlockBuilder,
    Headings,
    clean_inline,
    clean_multiline,
    decode_text,
)
from knowledge.parsers.html import html_fragment_text


def parse_markdown(data: bytes, builder: BlockBuilder) -> str | None:
    """Add the blocks of `data` to `builder`; the document's own title, if it has one.
    Raises `DocumentParseError` on a file it cannot read."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(decode_text(data))
    headings = Headings()
    title: str | None = None
    list_markers: list[str] = []  # "-" or "." for each open list
    item_marker: str | None = None  # the marker the next paragraph of a list item gets
    row: list[str] | None = None
    previous_tight = False  # the last block was a list item / table row

    for index, token in enumerate(tokens):
        kind = token.type
        if kind == "heading_open":
            text = _markdown_inline(tokens[index + 1])
            headings.push(int(token.tag[1]), text)
            title = title or text or None
            previous_tight = False
        elif kind in {"bullet_list_open", "ordered_list_open"}:
            list_markers.append(token.markup)
        elif kind in {"bullet_list_close", "ordered_list_close"}:
            list_markers.pop()
        elif kind == "list_item_open":
            item_marker = f"{token.info}{token.markup}" if token.info else "-"
        elif kind == "inline" and tokens[index - 1].type == "paragraph_open":
            text = _markdown_inline(token)
            tight = False
            if list_markers:
                tight = previous_tight
                if item_marker:
                    text = f"{item_marker} {text}"
                    item_marker = None
            builder.add(text, section=headings.path, tight=tight)
            previous_tight = bool(list_markers)
        elif kind == "tr_open":
            row = []
        elif kind == "inline" and row is not None:
            row.append(_markdown_inline(token))
        elif kind == "tr_close" and row is not None:
            builder.add(" | ".join(row), section=headings.path, tight=previous_tight)
            row = None
            previous_tight = True
        elif kind == "table_close":
            previous_tight = False
        elif kind in {"fence", "code_block"}:
            builder.add(clean_multiline(token.content, code=True), section=headings.path)
            previous_tight = False
        elif kind == "html_block":
            builder.add(html_fragment_text(token.content), section=headings.path)
            previous_tight = False
    return title


def _markdown_inline(token) -> str:
    parts: list[str] = []
    for child in token.children or []:
        if child.type in {"text", "text_special", "code_inline"}:
            parts.append(child.content)
        elif child.type in {"softbreak", "hardbreak"}:
            parts.append(" ")
        elif child.type == "image":
            parts.append(child.content)
    return clean_inline("".join(parts))
