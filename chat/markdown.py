"""Markdown written by a language model, as HTML that is safe to show: one function.

`markdown_html` renders with markdown-it-py (CommonMark + tables + strikethrough; raw HTML in
the text passes through the renderer) and then sanitises the result with bleach against an
allow-list: text-formatting tags only (others are stripped, their text kept), no scripts, no
styles, no event handlers or other attributes, no images, links only to http(s) and mailto
(and relative ones), each with rel="nofollow noopener noreferrer". Everything safe comes from
the allow-list, none of it from the renderer.
"""

from __future__ import annotations

from functools import partial

import bleach
from bleach.linkifier import LinkifyFilter
from markdown_it import MarkdownIt

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "hr", "strong", "em", "b", "i", "del", "s", "code", "pre", "blockquote",
        "ul", "ol", "li", "h1", "h2", "h3", "h4", "h5", "h6", "a",
        "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": ["href", "title", "rel"], "ol": ["start"]}
ALLOWED_PROTOCOLS = frozenset({"http", "https", "mailto"})
LINK_REL = "nofollow noopener noreferrer"

_renderer = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable(
    ["table", "strikethrough"]
)


def _link_rel(attrs: dict, new: bool = False) -> dict:
    attrs[(None, "rel")] = LINK_REL
    return attrs


_cleaner = bleach.Cleaner(
    tags=ALLOWED_TAGS,
    attributes=ALLOWED_ATTRIBUTES,
    protocols=ALLOWED_PROTOCOLS,
    strip=True,
    strip_comments=True,
    filters=[partial(LinkifyFilter, callbacks=[_link_rel], parse_email=False, skip_tags={"pre"})],
)


def markdown_html(text: str) -> str:
    """`text` (Markdown) as sanitised HTML."""
    return _cleaner.clean(_renderer.render(text)).strip()
