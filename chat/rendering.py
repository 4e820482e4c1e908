"""What the browser UI shows of messages and their sources, and the HTML fragments of a stream.

Pages and the WebSocket consumer render messages through the same views and the same
template partial (`chat/conversation.html#message`), so a reloaded conversation looks exactly
as it did when it streamed. Fragments are partials of the page templates they belong to
(django-template-partials): `chat/conversation.html#<name>` for the conversation,
`chat/layout.html#<name>` for the sidebar. Every piece of question, answer or document text is
escaped here or by the templates' autoescaping; the only HTML built in Python is the citation
badge, assembled with `format_html` around escaped text.
A generative answer (its message's `mode`) is Markdown: it is rendered and sanitised by
`chat.markdown.markdown_html` before its badges go in; an extractive answer stays plain escaped
text.
"""

from __future__ import annotations

import re
import threading
import uuid
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from bs4 import BeautifulSoup
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import get_script_prefix, reverse
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from chat.answering.citations import WORD_JOINER
from chat.markdown import markdown_html
from chat.models import Conversation, Feedback, Message
from chat.selectors import CitationRow, MessageRow, message_row
from knowledge.models import Document
from knowledge.retrieval import excerpt_of
from knowledge.selectors import document_original_path
from pages import safe_external_url, sidebar_context

MARKER_RE = re.compile(r"\[(\d{1,3})\]")
# A marker and the spaces before it, for the copied text ("… leave [1]." → "… leave.").
MARKER_WITH_SPACE_RE = re.compile(r"[ \t]*\[\d{1,3}\]")
VISIBLE_SOURCES = 3


@dataclass(frozen=True)
class SourceView:
    """One cited chunk as the UI shows it."""

    n: int
    title: str
    page: int | None
    section: str | None
    excerpt: str
    text: str
    chunk_id: int | None = None
    document_id: int | None = None
    external_url: str = ""
    document_available: bool = False
    has_file: bool = False
    stale: bool = False  # the cited passage has changed or left the knowledge base since
    sheet: str | None = None  # spreadsheets: the sheet and the cells cited ("A4:E4")
    cells: str | None = None

    @property
    def cell_reference(self) -> str:
        """The sheet and cells of a spreadsheet source ("Stocks!A4:E4"), else ""."""
        if not self.sheet:
            return ""
        return f"{self.sheet}!{self.cells}" if self.cells else self.sheet

    @property
    def heading(self) -> str:
        """The title, and for a spreadsheet the cells: "inventory.xlsx — Stocks!A4:E4"."""
        reference = self.cell_reference
        return f"{self.title} — {reference}" if reference else self.title

    @property
    def location(self) -> str:
        parts = []
        if self.page:
            parts.append(f"Page {self.page}")
        if self.section:
            parts.append(self.section)
        return " · ".join(parts)

    @property
    def document_url(self) -> str:
        """The document view scrolled to (and highlighting) the cited chunk."""
        if not (self.document_available and self.document_id):
            return ""
        url = reverse("knowledge:document", kwargs={"pk": self.document_id})
        if self.chunk_id:
            query = {"chunk": self.chunk_id}
            if self.sheet and self.cells:
                query["cells"] = self.cells
            url += f"?{urlencode(query)}#chunk-{self.chunk_id}"
        return url

    @property
    def file_url(self) -> str:
        """The original file; a PDF opens at the cited page."""
        if not (self.document_available and self.has_file and self.document_id):
            return ""
        url = reverse("knowledge:document_file", kwargs={"pk": self.document_id})
        if self.page:
            url += f"#page={self.page}"
        return url


@dataclass
class MessageView:
    """A message as the UI renders it, built from the database or from stream events."""

    id: str
    role: str
    status: str = Message.Status.COMPLETE
    content: str = ""
    created_at: datetime | None = None
    sources: list[SourceView] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    warning: str = ""
    error_code: str = ""
    question: str = ""  # for an answer: the question it answers
    reply_to_id: str = ""
    my_rating: int | None = None
    can_post: bool = True
    search_query: str = ""  # for an answer: what retrieval searched for
    mode: str = ""  # the message's Message.Mode ("" while streaming: plain text)

    @property
    def is_user(self) -> bool:
        return self.role == Message.Role.USER

    @property
    def is_streaming(self) -> bool:
        return self.status == Message.Status.STREAMING

    @property
    def is_refused(self) -> bool:
        return self.status == Message.Status.REFUSED

    @property
    def is_interrupted(self) -> bool:
        return self.status == Message.Status.INTERRUPTED

    @property
    def is_error(self) -> bool:
        return self.status == Message.Status.ERROR

    @property
    def visible_sources(self) -> list[SourceView]:
        return self.sources[:VISIBLE_SOURCES]

    @property
    def more_sources(self) -> list[SourceView]:
        return self.sources[VISIBLE_SOURCES:]

    @property
    def copy_text(self) -> str:
        """The answer as copied: the text without its [n] markers."""
        return copy_text_of(self.content)

    @property
    def is_markdown(self) -> bool:
        """A model's answer: Markdown, rendered (sanitised) rather than pre-wrapped text."""
        return self.mode == Message.Mode.GENERATIVE and not self.is_streaming

    @property
    def answer_html(self) -> SafeString:
        if self.is_markdown:
            return answer_markdown_html(self.content, self.sources, self.id)
        return answer_html(self.content, self.sources, self.id)

    @property
    def searched_for(self) -> str:
        return search_query_shown(self.search_query, self.question)

    @property
    def suggestion_items(self) -> list[dict[str, Any]]:
        """Refusal suggestions; "rephrase" ones become a button that refills the composer."""
        return [
            {"label": label, "rephrase": "rephrase" in label.lower()} for label in self.suggestions
        ]


def search_query_shown(search_query: str, question: str) -> str:
    """What retrieval searched for, as shown under an answer: only when it says something the
    question does not, i.e. set and not the question itself (ignoring case and spacing)."""
    shown = " ".join(search_query.split())
    if not shown or shown.casefold() == " ".join(question.split()).casefold():
        return ""
    return shown


def copy_text_of(content: str) -> str:
    """The answer as the Copy button puts it on the clipboard: no citation markers, and a
    document's own "[2]" as the document wrote it (without the invisible word joiner that keeps
    it from being read as a marker on the page)."""
    text = MARKER_WITH_SPACE_RE.sub("", content).replace(WORD_JOINER, "")
    return re.sub(r"[ \t]+([.,;:!?])", r"\1", text).strip()


def answer_html(content: str, sources: Sequence[SourceView], message_id: str) -> SafeString:
    """The answer text, escaped, with each `[n]` naming a source turned into a badge.

    The badge links to the source below the answer (a click scrolls there) and carries a card
    with the document title and excerpt, shown on hover and on keyboard focus. Markers that
    name no source stay as plain text. No whitespace is added: the text is pre-wrapped.
    """
    by_n = {source.n: source for source in sources}
    pieces: list[str] = []
    position = 0
    occurrence = 0
    for match in MARKER_RE.finditer(content):
        source = by_n.get(int(match.group(1)))
        if source is None:
            continue
        occurrence += 1
        # The badge hugs the sentence it closes: no line may start with it.
        pieces.append(escape(content[position : match.start()].rstrip(" \t")))
        pieces.append(citation_badge(source, message_id, occurrence))
        position = match.end()
    pieces.append(escape(content[position:]))
    return mark_safe("".join(pieces))  # every piece is escaped or format_html


def answer_markdown_html(
    content: str, sources: Sequence[SourceView], message_id: str
) -> SafeString:
    """A model's answer: its Markdown rendered and sanitised (`markdown_html`), then each `[n]`
    naming a source turned into a badge — only in text, never inside code or a link."""
    soup = BeautifulSoup(markdown_html(content), "html.parser")
    by_n = {source.n: source for source in sources}
    occurrence = 0
    for node in list(soup.find_all(string=MARKER_RE)):
        if node.find_parent(["code", "pre", "a"]) is not None:
            continue
        text = str(node)
        pieces: list[str] = []
        position = 0
        for match in MARKER_RE.finditer(text):
            source = by_n.get(int(match.group(1)))
            if source is None:
                continue
            occurrence += 1
            pieces.append(escape(text[position : match.start()].rstrip(" \t")))
            pieces.append(citation_badge(source, message_id, occurrence))
            position = match.end()
        if not pieces:
            continue
        pieces.append(escape(text[position:]))
        node.replace_with(BeautifulSoup("".join(pieces), "html.parser"))
    return mark_safe(str(soup))  # sanitised HTML; the badges are format_html


def citation_badge(source: SourceView, message_id: str, occurrence: int) -> str:
    card_id = f"cite-{message_id}-{occurrence}"
    location = (
        format_html('<span class="block text-xs opacity-70">{}</span>', source.location)
        if source.location
        else ""
    )
    return format_html(
        '<span class="cite dropdown dropdown-hover dropdown-bottom dropdown-center align-baseline">'
        '<a href="#src-{mid}-{n}" class="cite-badge badge badge-primary badge-xs mx-0.5 '
        'cursor-pointer px-1.5 font-semibold no-underline" data-cite="src-{mid}-{n}" '
        'aria-label="Source {n}: {title}" aria-describedby="{card}">{n}</a>'
        '<span id="{card}" role="tooltip" class="dropdown-content card card-sm z-30 w-72 '
        "border border-base-300 bg-base-100 text-base-content shadow-lg "
        'whitespace-normal"><span class="card-body gap-1 text-left">'
        '<span class="block text-sm font-semibold">{title}</span>{location}'
        '<span class="block text-xs leading-snug opacity-90">{excerpt}</span>'
        "</span></span></span>",
        mid=message_id,
        n=source.n,
        title=source.heading,
        card=card_id,
        location=location,
        excerpt=source.excerpt,
    )


# --- Building views ----------------------------------------------------------------------------


def _documents_info(document_ids: Iterable[int | None]) -> dict[int, bool]:
    """{document id: its original file can be opened} for the documents that still exist."""
    ids = {pk for pk in document_ids if pk}
    if not ids:
        return {}
    documents = Document.objects.filter(pk__in=ids).only("pk", "file", "source")
    return {document.pk: document_original_path(document) is not None for document in documents}


def quoted_rows_excerpt(text: str, content: str) -> str:
    """The excerpt of a spreadsheet source: the rows of its chunk the answer quotes (an
    answer quotes rows whole), else the chunk's beginning."""
    quoted = [line for line in text.split("\n") if line.strip() and line in content]
    return excerpt_of(" ".join(quoted) if quoted else text)


def _source_of(citation: CitationRow, documents: dict[int, bool], content: str = "") -> SourceView:
    document_id = citation.document_id_snapshot
    excerpt = (
        quoted_rows_excerpt(citation.text, content) if citation.sheet else excerpt_of(citation.text)
    )
    return SourceView(
        n=citation.n,
        title=citation.document_title,
        page=citation.page,
        section=citation.section,
        excerpt=excerpt,
        text=citation.text,
        chunk_id=citation.chunk_id_snapshot or citation.chunk_id,
        document_id=document_id,
        external_url=safe_external_url(citation.url),
        document_available=document_id in documents,
        has_file=documents.get(document_id, False),
        stale=citation.stale,
        sheet=citation.sheet,
        cells=citation.cells,
    )


@dataclass(frozen=True)
class _Surroundings:
    """What the views of some messages need besides the messages themselves."""

    documents: dict[int, bool]  # see _documents_info
    questions: dict[Any, str]  # question id → text, for the answers among the messages
    ratings: dict[Any, int]  # message id → the reader's rating

    def question_of(self, row: MessageRow) -> str:
        return self.questions.get(row.reply_to_id, "") if row.reply_to_id else ""


def _surroundings(
    rows: Sequence[MessageRow],
    user,
    *,
    conversation_id: uuid.UUID | None = None,
    questions: dict[uuid.UUID, str] | None = None,
) -> _Surroundings:
    """`conversation_id`: every row is a message of this conversation (the reader's ratings
    are then found by conversation rather than by a list of message ids). `questions`: texts
    of questions already known, by id."""
    documents = _documents_info(c.document_id_snapshot for row in rows for c in row.citations)
    questions = {
        **(questions or {}),
        **{row.id: row.content for row in rows if row.role == Message.Role.USER},
    }
    missing = {
        row.reply_to_id
        for row in rows
        if row.role == Message.Role.ASSISTANT
        and row.reply_to_id
        and row.reply_to_id not in questions
    }
    if missing:
        questions.update(Message.objects.filter(pk__in=missing).values_list("pk", "content"))
    ratings: dict[Any, int] = {}
    if user is not None and getattr(user, "is_authenticated", False) and rows:
        given = Feedback.objects.filter(user=user)
        if conversation_id is not None:
            given = given.filter(message__conversation_id=conversation_id)
        else:
            given = given.filter(message__in=[row.id for row in rows])
        ratings = dict(given.values_list("message_id", "rating"))
    return _Surroundings(documents=documents, questions=questions, ratings=ratings)


def _view_of(row: MessageRow, around: _Surroundings, *, can_post: bool) -> MessageView:
    return MessageView(
        id=str(row.id),
        role=row.role,
        status=row.status,
        content=row.content,
        created_at=row.created_at,
        sources=[_source_of(c, around.documents, row.content) for c in row.citations],
        suggestions=list(row.suggestions),
        warning=row.warning,
        error_code=row.error_code,
        question=around.question_of(row),
        reply_to_id=str(row.reply_to_id) if row.reply_to_id else "",
        my_rating=around.ratings.get(row.id),
        can_post=can_post,
        search_query=row.search_query,
        mode=row.mode,
    )


def message_views(
    messages: Sequence[Message],
    *,
    user=None,
    can_post: bool = True,
    questions: dict[uuid.UUID, str] | None = None,
) -> list[MessageView]:
    """Views of saved messages (citations prefetched or loaded here in one query each).
    `questions`: the text of questions the caller already knows, by id (not read again)."""
    rows = [message_row(message) for message in messages]
    around = _surroundings(rows, user, questions=questions)
    return [_view_of(row, around, can_post=can_post) for row in rows]


# --- A long conversation, reloaded ------------------------------------------------------------


class RenderCache:
    """Rendered output kept in this process by the values it was rendered from, least
    recently used dropped first, at most `max_chars` characters (output and key text) in all.

    Keys must hold every input of the rendering, so that a hit is exactly what rendering
    would produce now: a changed input is simply another key."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, value: Any, chars: int) -> None:
        if chars > self.max_chars:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._chars -= previous[1]
            self._entries[key] = (value, chars)
            self._chars += chars
            while self._chars > self.max_chars:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._chars -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0


def row_chars(row: MessageRow) -> int:
    """About how many characters a row holds (for RenderCache's bound)."""
    return len(row.content) + sum(len(c.text) + len(c.document_title) for c in row.citations)


# ~1 MB of HTML and 0.3 MB of text per 200-message conversation with citations: room for
# about 20 such conversations (or many more short ones) per process.
RENDERED_MESSAGES_MAX_CHARS = 25_000_000
rendered_messages = RenderCache(RENDERED_MESSAGES_MAX_CHARS)


def transcript_html(
    rows: Sequence[MessageRow], *, conversation_id: uuid.UUID, user=None, can_post: bool = True
) -> bytes:
    """The messages of a conversation (`rows`, in order) as its page shows them, as UTF-8:
    each the partial of `message_html` without an out-of-band swap (see `page_with_parts`).

    A message rendered before from the same inputs comes from `rendered_messages`: its row
    (text, status, citations and whether each is stale), the question it answers, the
    reader's rating, whether the reader may post, the state of the cited documents (still
    there, original file available), the time zone and the URL prefix. Reopening a long
    conversation renders only what changed; a streaming message is always rendered."""
    around = _surroundings(rows, user, conversation_id=conversation_id)
    prefix, zone = get_script_prefix(), timezone.get_current_timezone_name()
    rendered = []
    for row in rows:
        if row.status == Message.Status.STREAMING:
            rendered.append(message_html(_view_of(row, around, can_post=can_post)).encode())
            continue
        key = (
            prefix,
            zone,
            row,
            around.question_of(row),
            around.ratings.get(row.id),
            can_post,
            tuple(around.documents.get(c.document_id_snapshot) for c in row.citations),
        )
        html = rendered_messages.get(key)
        if html is None:
            # message_html is the autoescaped partial: its output is safe HTML.
            html = message_html(_view_of(row, around, can_post=can_post)).encode()
            rendered_messages.put(key, html, len(html) + row_chars(row))
        rendered.append(html)
    return b"".join(rendered)


# Room for a few document lists of some thousand documents each.
DOCUMENT_OPTIONS_MAX_CHARS = 4_000_000
rendered_document_options = RenderCache(DOCUMENT_OPTIONS_MAX_CHARS)


def document_options_html(documents: Sequence[tuple[int, str]]) -> bytes:
    """The settings dialog's checkbox per document ((id, title) pairs, in order), as UTF-8,
    rendered once per distinct list: a large knowledge base has thousands of documents, the
    same on every page until one is added, renamed or disabled."""
    key = tuple(documents)
    html = rendered_document_options.get(key)
    if html is None:
        html = render_to_string(  # an autoescaped partial
            "chat/conversation.html#document-options", {"documents": key}
        ).encode()
        rendered_document_options.put(key, html, 2 * len(html))
    return html


def page_with_parts(
    request: HttpRequest, template_name: str, context: dict[str, Any], parts: dict[str, bytes]
) -> HttpResponse:
    """The page, with each of `parts` (safe HTML, UTF-8) where the template shows the
    variable of that name.

    Long parts (a 200-message conversation, a list of thousands of documents: megabytes) are
    spliced into the encoded page instead of going through the template: Django joins the
    output of every template level into a new string and the response encodes it again,
    which costs more than rendering the rest of the page. The template sees a marker
    comment in their place; no escaped text can contain one (its "<" would be "&lt;")."""
    markers = {name: f"<!--sourced-part:{name}-->" for name in parts}
    text = render_to_string(
        template_name,
        {**context, **{name: mark_safe(marker) for name, marker in markers.items()}},
        request=request,
    )
    names = "|".join(re.escape(name) for name in parts)
    pieces = re.split(f"<!--sourced-part:({names})-->", text)  # text, name, text, …, text
    body = [piece.encode() if i % 2 == 0 else parts[piece] for i, piece in enumerate(pieces)]
    return HttpResponse(b"".join(body))


def sources_from_event(citations: Sequence[dict[str, Any]]) -> list[SourceView]:
    """Sources from a `sources` stream event (before the final message replaces them)."""
    documents = _documents_info(c.get("document_id") for c in citations)
    views = []
    for citation in citations:
        document_id = citation.get("document_id")
        excerpt = str(citation.get("excerpt") or "")
        text = str(citation.get("text") or excerpt)
        views.append(
            SourceView(
                n=int(citation["n"]),
                title=str(citation.get("title") or "Untitled document"),
                page=citation.get("page"),
                section=citation.get("section"),
                excerpt=excerpt,
                text=text,
                chunk_id=citation.get("chunk_id"),
                document_id=document_id,
                external_url=safe_external_url(citation.get("url")),
                document_available=document_id in documents,
                has_file=documents.get(document_id, False),
                stale=bool(citation.get("stale")),
                sheet=citation.get("sheet"),
                cells=citation.get("cells"),
            )
        )
    return sorted(views, key=lambda s: s.n)


# --- Fragments for the WebSocket ---------------------------------------------------------------


def message_html(view: MessageView, *, oob: str = "") -> str:
    """One message, optionally marked for an out-of-band swap (`true`, `outerHTML:#id`)."""
    return render_to_string("chat/conversation.html#message", {"m": view, "oob": oob})


def answer_start_html(
    data: Mapping[str, Any],
    *,
    question: str,
    question_id: str,
    warning: str = "",
    replace_target: str = "",
) -> str:
    """The answer's bubble as it starts streaming, from an `answer_start` event's data: the
    typing indicator, the question's warning, and what retrieval searched for (the data's
    `search_query`, shown when it is not the question itself). Appended to the messages, or
    in place of `replace_target` (the selector of the answer it replaces)."""
    view = MessageView(
        id=str(data["message_id"]),
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        warning=warning,
        question=question,
        reply_to_id=str(data.get("reply_to") or question_id),
        search_query=str(data.get("search_query") or ""),
    )
    if replace_target:
        return message_html(view, oob=f"outerHTML:{replace_target}")
    return append_to_messages(message_html(view))


def append_to_messages(html: str) -> str:
    return f'<div hx-swap-oob="beforeend:#messages">{html}</div>'


def delta_html(message_id: str, text: str) -> str:
    """One piece of the answer, escaped, appended to the streaming bubble's body."""
    return format_html('<div hx-swap-oob="beforeend:#msg-{}-body">{}</div>', message_id, text)


def sources_html(view: MessageView) -> str:
    return render_to_string("chat/conversation.html#sources-slot", {"m": view, "oob": True})


def warning_html(message_id: str, text: str) -> str:
    return render_to_string(
        "chat/conversation.html#warning", {"text": text, "target": f"#msg-{message_id}-warnings"}
    )


def notice_html(text: str, *, level: str = "warning", retry: bool = False) -> str:
    """A passing notice in the conversation (rate limit, read-only, refused request)."""
    return append_to_messages(
        render_to_string(
            "chat/conversation.html#notice", {"text": text, "level": level, "retry": retry}
        )
    )


def state_html(*, busy: bool, conversation_id: str = "", conversation_url: str = "") -> str:
    """The stream state the page's script follows (composer enabled, Stop shown, URL)."""
    return render_to_string(
        "chat/conversation.html#chat-state",
        {
            "busy": busy,
            "conversation_id": conversation_id,
            "conversation_url": conversation_url,
            "oob": True,
        },
    )


# --- The sidebar and the conversation's header -------------------------------------------------


def conversation_list_html(user, *, active_id: str = "", focus_id: str = "") -> str:
    """The sidebar's conversation list as it is now, out of band: a conversation that just got
    a question or a new title is at the top of its group. `focus_id`: the conversation whose
    rename button takes the focus (after renaming it in the sidebar)."""
    context = {**sidebar_context(user, active_id=active_id), "user": user, "list_oob": True}
    return render_to_string("chat/layout.html#conversation-list", {**context, "focus_id": focus_id})


def sidebar_item_html(conversation: Conversation, *, user, active_id: str = "") -> str:
    """One conversation of the sidebar (after its title editor is closed), its rename button
    focused."""
    context = {
        "conversation": conversation,
        "user": user,
        "active_id": active_id,
        "focus_id": str(conversation.pk),
    }
    return render_to_string("chat/layout.html#sidebar-item", context)


def conversation_header_html(conversation: Conversation, *, user) -> str:
    """The conversation page's header, out of band (when the first question created it)."""
    context = {"conversation": conversation, "user": user, "oob": True}
    return render_to_string("chat/conversation.html#conversation-header", context)


def conversation_title_html(
    conversation: Conversation, *, user, oob: bool = False, focus: bool = False
) -> str:
    """The title in the conversation page's header with its rename button (`focus`: the
    button takes the focus), in place of the title editor or (`oob`) out of band."""
    context = {"conversation": conversation, "user": user, "title_oob": oob, "focus_rename": focus}
    return render_to_string("chat/conversation.html#conversation-title", context)


def conversation_renamed_html(
    conversation: Conversation, *, user, shown_id: str, place: str
) -> str:
    """What changes on a page once `conversation` is renamed from its `place` ("header" or
    "sidebar"), all out of band: when the page shows this conversation (`shown_id`), the
    browser tab's title and the header's; always the sidebar, where renaming made the
    conversation the most recent. The rename button where the editor was takes the focus."""
    html = ""
    if shown_id == str(conversation.pk):
        html = format_html("<title>{} · Sourced</title>", conversation.title)
        html += conversation_title_html(conversation, user=user, oob=True, focus=place == "header")
    focus_id = str(conversation.pk) if place == "sidebar" else ""
    return html + conversation_list_html(user, active_id=shown_id, focus_id=focus_id)
