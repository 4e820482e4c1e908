"""What the browser UI shows of messages and their sources: the view models (`MessageView`,
`SourceView`) built from stored rows or stream events, and the answer text as HTML.

Pages and the WebSocket consumer render messages through the same views and the same
template partial (`chat/conversation.html#message`, `chat.fragments.message_html`), so a
reloaded conversation looks exactly as it did when it streamed. Every piece of question,
answer or document text is escaped here or by the templates' autoescaping; the only HTML
built in Python is the citation badge, assembled with `format_html` around escaped text.
A generative answer (its message's `mode`) is Markdown: it is rendered and sanitised by
`chat.markdown.markdown_html` before its badges go in; an extractive answer stays plain
escaped text.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from bs4 import BeautifulSoup
from django.utils.html import escape, format_html
from django.utils.safestring import SafeString, mark_safe

from chat.answering.evidence import WEAK_EVIDENCE_CARD, WEAK_EVIDENCE_NOTICE
from chat.citations import WORD_JOINER
from chat.documents import documents_file_state
from chat.markdown import markdown_html
from chat.models import Message
from chat.selectors import messages_text, ratings_given
from chat.templatetags.chat_urls import id_url
from chat.transcript import CitationRow, MessageRow, message_row, rows_for_reader
from chat.withheld import messages_withheld
from knowledge.access import Reader
from knowledge.personal import is_personal_file_label
from knowledge.retrieval import excerpt_of
from pages import safe_external_url

MARKER_RE = re.compile(r"\[(\d{1,3})\]")
# A marker and the spaces before it, for the copied text ("… leave [1]." → "… leave."). A
# match starts only where a run of spaces does (the lookbehind): linear on long runs
# (docs/decisions/0101-linear-text-regexes.md).
MARKER_WITH_SPACE_RE = re.compile(r"(?<![ \t])[ \t]*\[\d{1,3}\]")
_SPACE_BEFORE_PUNCTUATION = re.compile(r"(?<![ \t])[ \t]+([.,;:!?])")
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
    ocr_confidence: float | None = None  # read by OCR from a scanned page
    similarity: float | None = None  # cosine similarity of the chunk to the question
    chunk_index: int | None = None  # the chunk's position in its document

    @property
    def similarity_shown(self) -> str:
        """The similarity as the Sources block shows it ("0.82"), else ""."""
        return "" if self.similarity is None else f"{self.similarity:.2f}"

    @property
    def is_personal_file(self) -> bool:
        """The source is the reader's own file (knowledge/personal.py)."""
        return is_personal_file_label(self.title)

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
        if self.ocr_confidence is not None:
            parts.append(f"scanned page, OCR confidence {self.ocr_confidence:.0f}%")
        if self.section:
            parts.append(self.section)
        return " · ".join(parts)

    @property
    def document_url(self) -> str:
        """The document view scrolled to (and highlighting) the cited chunk."""
        if not (self.document_available and self.document_id):
            return ""
        url = id_url("knowledge:document", self.document_id)
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
        url = id_url("knowledge:document_file", self.document_id)
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
    # For an answer: the titles of the documents its question named ("A, B").
    searched_document: str = ""
    mode: str = ""  # the message's Message.Mode ("" while streaming: plain text)
    withheld: str = ""  # a chat.withheld.Withheld reason: `content` is its notice
    evidence: str = ""  # an answer's Message.Evidence ("" while streaming, or not recorded)

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
    def sources_line(self) -> str:
        """The collapsed Sources block's one line: each cited document's title once, in order
        of citation ("Expenses policy, Staff handbook")."""
        return ", ".join(dict.fromkeys(source.title for source in self.sources))

    @property
    def copy_text(self) -> str:
        """The answer as copied: the text without its [n] markers."""
        return copy_text_of(self.content)

    @property
    def is_weak(self) -> bool:
        """An answer from weak evidence: shown with `weak_notice` (`docs/product.md §4`)."""
        return (
            self.evidence == Message.Evidence.WEAK
            and not self.is_user
            and not self.is_refused
            and not self.withheld
        )

    @property
    def weak_notice(self) -> str:
        return WEAK_EVIDENCE_NOTICE if self.is_weak else ""

    @property
    def is_markdown(self) -> bool:
        """A model's answer: Markdown, rendered (sanitised) rather than pre-wrapped text."""
        return self.mode == Message.Mode.GENERATIVE and not self.is_streaming

    @property
    def answer_html(self) -> SafeString:
        if self.is_markdown:
            return answer_markdown_html(self.content, self.sources, self.id, weak=self.is_weak)
        return answer_html(self.content, self.sources, self.id, weak=self.is_weak)

    @property
    def searched_for(self) -> str:
        return search_query_shown(self.search_query, self.question)

    @property
    def suggestion_items(self) -> list[dict[str, Any]]:
        """Refusal suggestions; "rephrase" ones become a button that refills the composer."""
        return [
            {"label": label, "rephrase": "rephrase" in label.lower()} for label in self.suggestions
        ]


def searched_in(title: str, documents: Iterable[dict | tuple[int, str]]) -> str:
    """ "A, B": the titles of the documents an answer's question named (`documents`,
    `{id, title}` or (id, title)), else its one searched document's `title`."""
    titles = [str(d.get("title") or "") if isinstance(d, dict) else str(d[1]) for d in documents]
    return ", ".join(t for t in titles if t) or title


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
    return _SPACE_BEFORE_PUNCTUATION.sub(r"\1", text).strip()


def answer_html(
    content: str, sources: Sequence[SourceView], message_id: str, *, weak: bool = False
) -> SafeString:
    """The answer text, escaped, with each `[n]` naming a source turned into a badge.

    The badge links to the source below the answer (a click scrolls there) and carries a card
    with the document title and excerpt, shown on hover and on keyboard focus; with `weak` (an
    answer from weak evidence) the card also says the documents may not answer the question
    directly. Markers that name no source stay as plain text. No whitespace is added: the text
    is pre-wrapped.
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
        pieces.append(citation_badge(source, message_id, occurrence, weak=weak))
        position = match.end()
    pieces.append(escape(content[position:]))
    return mark_safe("".join(pieces))  # every piece is escaped or format_html


def answer_markdown_html(
    content: str, sources: Sequence[SourceView], message_id: str, *, weak: bool = False
) -> SafeString:
    """A model's answer: its Markdown rendered and sanitised (`markdown_html`), then each `[n]`
    naming a source turned into a badge (`weak`: as `answer_html`) — only in text, never inside
    code or a link."""
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
            pieces.append(citation_badge(source, message_id, occurrence, weak=weak))
            position = match.end()
        if not pieces:
            continue
        pieces.append(escape(text[position:]))
        node.replace_with(BeautifulSoup("".join(pieces), "html.parser"))
    return mark_safe(str(soup))  # sanitised HTML; the badges are format_html


def citation_badge(
    source: SourceView, message_id: str, occurrence: int, *, weak: bool = False
) -> str:
    """The badge of one `[n]` marker with its hover card; `weak`: the card also carries the
    weak-evidence notice (WEAK_EVIDENCE_CARD)."""
    card_id = f"cite-{message_id}-{occurrence}"
    location = (
        format_html('<span class="block text-xs opacity-70">{}</span>', source.location)
        if source.location
        else ""
    )
    notice = (
        format_html(
            '<span class="block text-xs font-medium" data-weak-evidence>{}</span>',
            WEAK_EVIDENCE_CARD,
        )
        if weak
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
        '{notice}<span class="block text-sm font-semibold">{title}</span>{location}'
        '<span class="block text-xs leading-snug opacity-90">{excerpt}</span>'
        "</span></span></span>",
        mid=message_id,
        n=source.n,
        title=source.heading,
        card=card_id,
        location=location,
        notice=notice,
        excerpt=source.excerpt,
    )


# --- Building views ----------------------------------------------------------------------------


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
        ocr_confidence=citation.ocr_confidence,
        similarity=citation.similarity,
        chunk_index=citation.chunk_index,
    )


@dataclass(frozen=True)
class Surroundings:
    """What the views of some messages need besides the messages themselves."""

    documents: dict[int, bool]  # see chat.documents.documents_file_state
    questions: dict[Any, str]  # question id → text, for the answers among the messages
    ratings: dict[Any, int]  # message id → the reader's rating

    def question_of(self, row: MessageRow) -> str:
        return self.questions.get(row.reply_to_id, "") if row.reply_to_id else ""


def surroundings_read(
    rows: Sequence[MessageRow],
    user,
    *,
    conversation_id: uuid.UUID | None = None,
    questions: dict[uuid.UUID, str] | None = None,
    ratings: dict[uuid.UUID, int] | None = None,
) -> Surroundings:
    """What the views of `rows` need, read for the reader `user` (None: no ratings): the
    cited documents' state, the questions the answers answer, the reader's ratings.
    `conversation_id`: every row is a message of this conversation (the reader's ratings are
    then found by conversation rather than by a list of message ids). `questions`: texts of
    questions already known, by id (not read again). `ratings`: the reader's ratings of `rows`
    when the caller read them (not read again)."""
    documents = documents_file_state(c.document_id_snapshot for row in rows for c in row.citations)
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
        questions.update(messages_text(missing))
    if ratings is None:
        ratings = _ratings_read(rows, user, conversation_id=conversation_id)
    return Surroundings(documents=documents, questions=questions, ratings=ratings)


def _ratings_read(
    rows: Sequence[MessageRow], user, *, conversation_id: uuid.UUID | None
) -> dict[uuid.UUID, int]:
    """The reader `user`'s ratings of `rows` (one query; none for no reader or no rows)."""
    if user is None or not getattr(user, "is_authenticated", False) or not rows:
        return {}
    if conversation_id is not None:
        return ratings_given(user, conversation_id=conversation_id)
    return ratings_given(user, message_ids=[row.id for row in rows])


def view_of_row(row: MessageRow, around: Surroundings, *, can_post: bool) -> MessageView:
    """The view of a stored row, with what `around` read for it."""
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
        searched_document=searched_in(row.searched_document_title, row.searched_documents),
        mode=row.mode,
        withheld=row.withheld,
        evidence=row.evidence,
    )


def message_views(
    messages: Sequence[Message | MessageRow],
    *,
    user=None,
    can_post: bool = True,
    questions: dict[uuid.UUID, str] | None = None,
    reader: Reader | None = None,
    ratings: dict[uuid.UUID, int] | None = None,
) -> list[MessageView]:
    """Views of saved messages (instances, their citations prefetched or loaded here in one
    query each, or rows already read: `chat.transcript`), as the reader `user` may read them:
    an answer drawing on a document they may not read is withheld
    (`chat.withheld.messages_withheld`, one query), whether it cites the document or was only
    given it. `questions`: the text of questions the caller already knows, by id (not
    read again). `reader`: `user`'s `Reader`, when the caller computed it for this request.
    `ratings`: `user`'s ratings of `messages`, when the caller read them with the rows."""
    rows = [m if isinstance(m, MessageRow) else message_row(m) for m in messages]
    answers = [row.id for row in rows if row.role != Message.Role.USER]
    if answers:
        withheld = messages_withheld(user=reader or user, message_ids=answers)
        rows = rows_for_reader(rows, withheld)
    around = surroundings_read(rows, user, questions=questions, ratings=ratings)
    return [view_of_row(row, around, can_post=can_post) for row in rows]


def streamed_answer_view(
    row: MessageRow, *, rating: int | None, question: str, documents: dict[int, bool]
) -> MessageView:
    """The view of an answer its asker has just been sent whole over their socket (every piece
    of its text, then its sources), for the render that replaces what streamed. It is not
    checked for withholding again (`message_views` does that for any other render): it shows
    nothing the socket has not just sent to this very reader. `rating`: the reader's rating
    of it, read with the row; `question` the text of the question it answers; `documents` the
    cited documents' state its sources were shown with (`documents_file_state`, read for them
    a moment before). Reads nothing."""
    known = {row.reply_to_id: question} if row.reply_to_id else {}
    around = Surroundings(
        documents=documents,
        questions=known,
        ratings={row.id: rating} if rating is not None else {},
    )
    return view_of_row(row, around, can_post=True)


def sources_from_event(
    citations: Sequence[dict[str, Any]], *, documents: dict[int, bool] | None = None
) -> list[SourceView]:
    """Sources from a `sources` stream event (before the final message replaces them).
    `documents`: the cited documents' state (`documents_file_state`) when the caller read it."""
    if documents is None:
        documents = documents_file_state(c.get("document_id") for c in citations)
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
                ocr_confidence=citation.get("ocr_confidence"),
                similarity=citation.get("similarity"),
                chunk_index=citation.get("chunk_index"),
            )
        )
    return sorted(views, key=lambda s: s.n)
