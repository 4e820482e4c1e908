"""What the browser UI shows of messages and their sources, and the HTML fragments of a stream.

Pages and the WebSocket consumer render messages through the same views and the same
template partial (`chat/partials/message.html`), so a reloaded conversation looks exactly as it
did when it streamed. Every piece of question, answer or document text is escaped here or by
the templates' autoescaping; the only HTML built in Python is the citation badge, assembled
with `format_html` around escaped text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from chat.answering.citations import citation_is_stale
from chat.models import Feedback, Message
from knowledge.models import Document
from knowledge.retrieval import excerpt_of

MARKER_RE = re.compile(r"\[(\d{1,3})\]")
# A marker and the spaces before it, for the copied text ("… leave [1]." → "… leave.").
MARKER_WITH_SPACE_RE = re.compile(r"[ \t]*\[\d{1,3}\]")
VISIBLE_SOURCES = 3


def safe_external_url(url: str | None) -> str:
    """The URL when it is an absolute http(s) link, else "" (no javascript:, data:, …)."""
    if not url:
        return ""
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if parts.scheme.lower() not in {"http", "https"} or not parts.netloc:
        return ""
    return url


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
            url += f"?chunk={self.chunk_id}#chunk-{self.chunk_id}"
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
    def answer_html(self) -> SafeString:
        return answer_html(self.content, self.sources, self.id)

    @property
    def suggestion_items(self) -> list[dict[str, Any]]:
        """Refusal suggestions; "rephrase" ones become a button that refills the composer."""
        return [
            {"label": label, "rephrase": "rephrase" in label.lower()} for label in self.suggestions
        ]


def copy_text_of(content: str) -> str:
    text = MARKER_WITH_SPACE_RE.sub("", content)
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
        title=source.title,
        card=card_id,
        location=location,
        excerpt=source.excerpt,
    )


# --- Building views ----------------------------------------------------------------------------


def _documents_info(document_ids: Iterable[int | None]) -> dict[int, bool]:
    """{document id: its original file can be opened} for the documents that still exist."""
    from knowledge.views import original_path

    ids = {pk for pk in document_ids if pk}
    if not ids:
        return {}
    documents = Document.objects.filter(pk__in=ids).only("pk", "file", "source")
    return {document.pk: original_path(document) is not None for document in documents}


def _source_from_citation(citation, documents: dict[int, bool]) -> SourceView:
    document_id = citation.document_id_snapshot
    return SourceView(
        n=citation.n,
        title=citation.document_title,
        page=citation.page,
        section=citation.section,
        excerpt=excerpt_of(citation.text),
        text=citation.text,
        chunk_id=citation.chunk_id_snapshot or citation.chunk_id,
        document_id=document_id,
        external_url=safe_external_url(citation.url),
        document_available=document_id in documents,
        has_file=documents.get(document_id, False),
        stale=citation_is_stale(citation),
    )


def message_views(
    messages: Sequence[Message], *, user=None, can_post: bool = True
) -> list[MessageView]:
    """Views of saved messages (citations prefetched or loaded here in one query each)."""
    messages = list(messages)
    citations_of: dict[Any, list] = {}
    for message in messages:
        citations_of[message.pk] = sorted(message.citations.all(), key=lambda c: c.n)
    documents = _documents_info(
        c.document_id_snapshot for cites in citations_of.values() for c in cites
    )
    questions = {m.pk: m.content for m in messages if m.role == Message.Role.USER}
    missing = {
        m.reply_to_id
        for m in messages
        if m.role == Message.Role.ASSISTANT and m.reply_to_id and m.reply_to_id not in questions
    }
    if missing:
        questions.update(Message.objects.filter(pk__in=missing).values_list("pk", "content"))
    ratings: dict[Any, int] = {}
    if user is not None and getattr(user, "is_authenticated", False):
        ratings = dict(
            Feedback.objects.filter(user=user, message__in=[m.pk for m in messages]).values_list(
                "message_id", "rating"
            )
        )
    views = []
    for message in messages:
        views.append(
            MessageView(
                id=str(message.pk),
                role=message.role,
                status=message.status,
                content=message.content,
                created_at=message.created_at,
                sources=[_source_from_citation(c, documents) for c in citations_of[message.pk]],
                suggestions=[str(s) for s in (message.suggestions or [])],
                warning=message.warning,
                error_code=message.error_code,
                question=questions.get(message.reply_to_id, "") if message.reply_to_id else "",
                reply_to_id=str(message.reply_to_id) if message.reply_to_id else "",
                my_rating=ratings.get(message.pk),
                can_post=can_post,
            )
        )
    return views


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
            )
        )
    return sorted(views, key=lambda s: s.n)


# --- Fragments for the WebSocket ---------------------------------------------------------------


def message_html(view: MessageView, *, oob: str = "") -> str:
    """One message, optionally marked for an out-of-band swap (`true`, `outerHTML:#id`)."""
    return render_to_string("chat/partials/message.html", {"m": view, "oob": oob})


def append_to_messages(html: str) -> str:
    return f'<div hx-swap-oob="beforeend:#messages">{html}</div>'


def delta_html(message_id: str, text: str) -> str:
    """One piece of the answer, escaped, appended to the streaming bubble's body."""
    return format_html('<div hx-swap-oob="beforeend:#msg-{}-body">{}</div>', message_id, text)


def sources_html(view: MessageView) -> str:
    return render_to_string("chat/partials/sources_slot.html", {"m": view, "oob": True})


def warning_html(message_id: str, text: str) -> str:
    return render_to_string(
        "chat/partials/warning.html", {"text": text, "target": f"#msg-{message_id}-warnings"}
    )


def notice_html(text: str, *, level: str = "warning", retry: bool = False) -> str:
    """A passing notice in the conversation (rate limit, read-only, refused request)."""
    return append_to_messages(
        render_to_string(
            "chat/partials/notice.html", {"text": text, "level": level, "retry": retry}
        )
    )


def state_html(*, busy: bool, conversation_id: str = "", conversation_url: str = "") -> str:
    """The stream state the page's script follows (composer enabled, Stop shown, URL)."""
    return render_to_string(
        "chat/partials/chat_state.html",
        {
            "busy": busy,
            "conversation_id": conversation_id,
            "conversation_url": conversation_url,
            "oob": True,
        },
    )
