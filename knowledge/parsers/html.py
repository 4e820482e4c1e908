"""HTML (BeautifulSoup's html.parser): headings open sections; block elements, list items and
table rows are blocks; scripts, styles and navigation are dropped. A file nested deeper than
HTML_MAX_DEPTH is refused before it is parsed."""

from __future__ import annotations

from html.parser import HTMLParser

from knowledge.parsers.base import (
    HTML_MAX_DEPTH,
    BlockBuilder,
    DocumentParseError,
    Headings,
    clean_inline,
    clean_multiline,
)


def html_fragment_text(html: str) -> str:
    """The text of an HTML fragment (a Markdown HTML block), scripts and styles left out."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    for tag in soup(["script", "style", "template", "noscript"]):
        tag.decompose()
    return clean_inline(soup.get_text(" "))


_HTML_DROP = ["script", "style", "nav", "noscript", "template", "svg", "iframe", "head", "title"]
# Elements that never hold others (BeautifulSoup's html.parser builder treats them so too).
_HTML_VOID = {
    "area", "base", "basefont", "bgsound", "br", "col", "command", "embed", "frame", "hr",
    "image", "img", "input", "isindex", "keygen", "link", "menuitem", "meta", "nextid",
    "param", "source", "spacer", "track", "wbr",
}  # fmt: skip
_HTML_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_HTML_BLOCKS = {
    "address", "article", "aside", "blockquote", "body", "caption", "dd", "details", "dialog",
    "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "header", "hgroup",
    "hr", "html", "li", "main", "menu", "ol", "p", "section", "summary", "table", "tbody",
    "td", "tfoot", "th", "thead", "ul",
}  # fmt: skip


class _TooDeep(Exception):
    pass


class _DepthProbe(HTMLParser):
    """Follows the open elements the way BeautifulSoup's html.parser tree builder nests
    them (void elements never open, an end tag closes up to its most recent start tag, a
    stray one is ignored) and stops at the first element deeper than `limit`."""

    def __init__(self, limit: int) -> None:
        super().__init__(convert_charrefs=False)
        self.limit = limit
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in _HTML_VOID:
            return
        self.open.append(tag)
        if len(self.open) > self.limit:
            raise _TooDeep

    def handle_startendtag(self, tag: str, attrs) -> None:
        pass  # <tag/>: opens nothing

    def handle_endtag(self, tag: str) -> None:
        for position in range(len(self.open) - 1, -1, -1):  # at most `limit` steps
            if self.open[position] == tag:
                del self.open[position:]
                return


def _html_depth_check(data: bytes) -> None:
    # Tags are ASCII in every encoding a web page may use but UTF-16/32, which latin-1 reads
    # without error (a UTF-16 page then shows no tags here and is simply not checked).
    probe = _DepthProbe(HTML_MAX_DEPTH)
    try:
        probe.feed(data.decode("latin-1"))
        probe.close()
    except _TooDeep:
        raise DocumentParseError(
            f"The HTML is nested too deeply to be read (more than {HTML_MAX_DEPTH} levels of "
            "elements inside each other)."
        ) from None


_FLUSH, _FLUSH_ROW = object(), object()  # markers of the walk: the end of a block / a row


def parse_html(data: bytes, builder: BlockBuilder) -> str | None:
    """Add the blocks of `data` to `builder`; the document's own title, if it has one.
    Raises `DocumentParseError` on a file it cannot read."""
    from bs4 import BeautifulSoup
    from bs4.element import Comment, Declaration, Doctype, NavigableString, ProcessingInstruction

    _html_depth_check(data)
    soup = BeautifulSoup(data, "html.parser")
    head_title = soup.title.get_text(" ") if soup.title else ""
    for tag in soup(_HTML_DROP):
        tag.decompose()
    skipped = (Comment, Declaration, Doctype, ProcessingInstruction)
    headings = Headings()
    first_heading: list[str] = []
    buffer: list[str] = []
    last_was_row = [False]  # the last block was a list item or a table row

    # The elements holding a block or a heading somewhere inside, in one pass (asking each
    # element in turn would search the same subtrees again and again).
    holds_block: set[int] = set()
    for tag in soup.find_all(lambda t: t.name in _HTML_BLOCKS or t.name in _HTML_HEADINGS):
        parent = tag.parent
        while parent is not None and id(parent) not in holds_block:
            holds_block.add(id(parent))
            parent = parent.parent

    def flush(row: bool = False) -> None:
        text = clean_inline("".join(buffer))
        buffer.clear()
        if text:
            builder.add(text, section=headings.path, tight=row and last_was_row[0])
            last_was_row[0] = row

    # Document order without recursion: a block's children go on the stack in front of the
    # marker that ends it.
    stack: list = list(reversed(soup.contents))
    while stack:
        child = stack.pop()
        if child is _FLUSH or child is _FLUSH_ROW:
            flush(row=child is _FLUSH_ROW)
            continue
        if isinstance(child, NavigableString):
            if not isinstance(child, skipped):
                buffer.append(str(child))
            continue
        name = child.name
        if name in _HTML_HEADINGS:
            flush()
            text = clean_inline(child.get_text(" "))
            headings.push(_HTML_HEADINGS[name], text)
            last_was_row[0] = False
            if text and not first_heading:
                first_heading.append(text)
        elif name == "tr":
            flush()
            cells = [clean_inline(cell.get_text(" ")) for cell in child.find_all(["td", "th"])]
            buffer.append(" | ".join(c for c in cells if c))
            flush(row=True)
        elif name == "pre":
            flush()
            builder.add(clean_multiline(child.get_text(), code=True), section=headings.path)
            last_was_row[0] = False
        elif name == "br":
            buffer.append(" ")
        elif name == "li":
            flush()
            stack.append(_FLUSH_ROW)
            stack.extend(reversed(child.contents))
        elif name in _HTML_BLOCKS or id(child) in holds_block:
            flush()
            stack.append(_FLUSH)
            stack.extend(reversed(child.contents))
        else:
            buffer.append(child.get_text())

    flush()
    return first_heading[0] if first_heading else (clean_inline(head_title) or None)
