"""Reads of the chat, visibility-aware: shared conversations are readable by all staff, private
ones by their owner only — in lists, pages, the API, the WebSocket and search alike."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from enum import StrEnum

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import (
    BooleanField,
    Count,
    Exists,
    ExpressionWrapper,
    F,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Window,
)
from django.db.models.functions import Coalesce, RowNumber

from chat.answering.citations import citation_is_stale
from chat.answering.errors import AnswerError
from chat.answering.followups import Turn
from chat.models import Citation, Conversation, DocumentGiven, Feedback, Message
from chat.withheld_sql import withheld_rows
from knowledge.access import (
    Reader,
    UserLike,
    documents_readable,
    documents_readable_filter,
    personal_files_filter,
    reader_for,
)
from knowledge.models import Document
from knowledge.retrieval import not_expired
from knowledge.selectors import (
    document_error_for,
    document_original_path,
    document_source_label,
    documents_visible_to,
)

CITATION_FIELDS = tuple(field.name for field in Citation._meta.concrete_fields)


class ConversationAccess(StrEnum):
    """What a user may do with a conversation: the one privacy rule of the chat
    (docs/product.md §7)."""

    NONE = "none"  # someone else's private conversation: not even its existence
    READ = "read"  # someone else's shared conversation
    OWNER = "owner"  # read, post, rename, delete


def conversation_access(user: AbstractBaseUser, conversation: Conversation) -> ConversationAccess:
    """Shared conversations are readable by all staff, private ones by their owner only, and
    only the owner posts to, renames or deletes a conversation. Pages, the API, the WebSocket,
    search and the services all ask here (`conversations_visible_filter` is the same rule for
    queries)."""
    if conversation.owner_id == user.pk:
        return ConversationAccess.OWNER
    return ConversationAccess.NONE if conversation.is_private else ConversationAccess.READ


def conversations_visible_filter(user: AbstractBaseUser, *, prefix: str = "") -> Q:
    """`conversation_access` as a filter: the conversations `user` may read (`prefix` is the
    path to the conversation from the filtered model, e.g. "conversation__")."""
    return Q(**{f"{prefix}is_private": False}) | Q(**{f"{prefix}owner_id": user.pk})


def conversations_admin_filter(user: AbstractBaseUser, *, prefix: str = "") -> Q:
    """What the admin shows of conversations and their messages (conversations, messages,
    feedback, unanswered questions). Policy: superusers see every conversation; other staff
    with admin access see what they see in the chat (shared ones and their own private ones),
    so the admin is no way around a conversation's privacy."""
    if user.is_active and user.is_superuser:
        return Q()
    return conversations_visible_filter(user, prefix=prefix)


def messages_admin_filter(user: AbstractBaseUser, *, prefix: str = "") -> Q:
    """What the admin shows of messages (through `prefix`, e.g. "message__" for feedback):
    those of the conversations `conversations_admin_filter` shows, less the answers withheld
    from `user` (`messages_withheld_filter`), so the admin is no way around a collection's
    readers either. For a superuser, every message but those drawing on someone else's
    personal file."""
    visible = conversations_admin_filter(user, prefix=f"{prefix}conversation__")
    return visible & ~messages_withheld_filter(user=user, prefix=prefix)


def conversations_visible_to(user: AbstractBaseUser) -> QuerySet[Conversation]:
    """Every conversation `user` may read, newest first."""
    return (
        Conversation.objects.filter(conversations_visible_filter(user))
        .select_related("owner")
        .order_by("-updated_at", "-created_at")
    )


def conversation_groups_for(
    user: AbstractBaseUser, *, search: str = "", limit: int | None = None
) -> tuple[list[Conversation], list[Conversation]]:
    """(shared, private) conversations for the sidebar/history, each newest first; `search`
    narrows to titles containing it; `limit`: at most that many of each. One query either way
    (docs/decisions/0047-the-sidebar-in-one-query.md)."""
    visible = conversations_visible_to(user)
    if search:
        visible = visible.filter(title__icontains=search)
    mine_or_shared = Q(is_private=False) | Q(is_private=True, owner_id=user.pk)
    if limit is None:
        rows = list(visible.filter(mine_or_shared))
    else:
        newest = Window(
            RowNumber(),
            partition_by=[F("is_private")],
            order_by=[F("updated_at").desc(), F("created_at").desc()],
        )
        rows = list(visible.filter(mine_or_shared).annotate(rank=newest).filter(rank__lte=limit))
        rows.sort(key=lambda c: (c.updated_at, c.created_at), reverse=True)
    return [c for c in rows if not c.is_private], [c for c in rows if c.is_private]


def conversation_access_by_id(
    user: AbstractBaseUser, conversation_id: uuid.UUID | str
) -> ConversationAccess | None:
    """`conversation_access` of the conversation `conversation_id`, None when it does not
    exist (yet: a first question creates it). One query of two columns."""
    conversation = (
        Conversation.objects.filter(pk=conversation_id).only("owner_id", "is_private").first()
    )
    return None if conversation is None else conversation_access(user, conversation)


def conversation_get(conversation_id: uuid.UUID | str) -> Conversation | None:
    """The conversation with its owner, None when it does not exist. The caller has checked
    the reader's access."""
    return Conversation.objects.select_related("owner").filter(pk=conversation_id).first()


def conversation_get_for(user: AbstractBaseUser, conversation_id: uuid.UUID) -> Conversation:
    """The conversation, when `user` may read it.

    Raises AnswerError: not-found (404) when it does not exist, forbidden (403) when it is
    someone else's private conversation.
    """
    conversation = Conversation.objects.select_related("owner").filter(pk=conversation_id).first()
    if conversation is None:
        raise AnswerError.not_found("There is no conversation with this id.")
    if conversation_access(user, conversation) == ConversationAccess.NONE:
        raise AnswerError.forbidden("This conversation is private.")
    return conversation


def citations_with_source_state() -> QuerySet[Citation]:
    """Citations by number, each with the few columns of its chunk and document that tell
    whether it is stale (`citation_is_stale`): the chunk's text, the document's enabled flag
    and status. Not the chunk's search vector or the document's metadata, which are large and
    unused here."""
    return (
        Citation.objects.select_related("chunk__document")
        .only(
            *CITATION_FIELDS,
            "chunk__text",
            "chunk__document__enabled",
            "chunk__document__status",
            "chunk__document__expires_at",
        )
        .order_by("n")
    )


def conversation_messages(conversation: Conversation) -> list[Message]:
    """The conversation's messages in order, citations (with what tells stale ones)
    prefetched: two queries whatever the length."""
    return list(
        conversation.messages.exclude(role__in=Message.HIDDEN_ROLES)
        .order_by("created_at", "id")
        .prefetch_related(Prefetch("citations", queryset=citations_with_source_state()))
    )


@dataclass(frozen=True, slots=True)
class CitationRow:
    """A stored citation as a plain value (what the API and the page show of it)."""

    n: int
    chunk_id: int | None
    chunk_id_snapshot: int | None
    document_id_snapshot: int | None
    document_title: str
    page: int | None
    section: str | None
    sheet: str | None
    cells: str | None
    ocr_confidence: float | None
    url: str
    text: str
    similarity: float
    chunk_index: int | None
    stale: bool  # see citation_is_stale


@dataclass(frozen=True, slots=True)
class MessageRow:
    """A stored message and its citations as a plain, hashable value: equal rows show the
    same, so a row is also the key of what was rendered from it."""

    id: uuid.UUID
    role: str
    content: str
    status: str
    reply_to_id: uuid.UUID | None
    mode: str
    suggestions: tuple[str, ...]
    warning: str
    search_query: str
    searched_document_id: int | None  # the document its question named (named_documents.py)
    searched_document_title: str
    error_code: str
    # Every document its question named and it was searched in, (id, title) pairs (see
    # Message.searched_documents): empty for one stored before, or none.
    searched_documents: tuple[tuple[int, str], ...]
    evidence: str  # Message.Evidence of an answer ("" otherwise)
    created_at: datetime
    citations: tuple[CitationRow, ...]
    withheld: str = ""  # a `Withheld` reason: the row then holds the notice, not the answer

    def __post_init__(self) -> None:
        # The stored JSON `[{id, title}]` as (id, title) pairs: the row stays hashable.
        pairs = tuple(
            (int(d["id"]), str(d["title"])) if isinstance(d, dict) else tuple(d)
            for d in self.searched_documents or ()
        )
        object.__setattr__(self, "searched_documents", pairs)

    @property
    def pk(self) -> uuid.UUID:
        return self.id


# Columns read, in the order of the rows' fields.
_MESSAGE_COLUMNS = tuple(
    f.name for f in fields(MessageRow) if f.name not in {"citations", "withheld"}
)
_CITATION_COLUMNS = tuple(f.name for f in fields(CitationRow) if f.name != "stale")
_SUGGESTIONS = _MESSAGE_COLUMNS.index("suggestions")


def _suggestions(value: object) -> tuple[str, ...]:
    return tuple(str(item) for item in value) if isinstance(value, list) else ()


class Withheld(StrEnum):
    """Why an answer is withheld from a reader (docs/decisions/0080-withheld-answers.md)."""

    ACCESS = "access"  # it cites a document of a collection the reader may not read
    WITHDRAWN = "withdrawn"  # it cites a disabled, expired or deleted document

    @property
    def notice(self) -> str:
        """What the reader sees in the answer's place."""
        if self == Withheld.ACCESS:
            return "This answer draws on documents you don't have access to."
        return "This answer draws on a document that has been withdrawn."


def _cited_document_id() -> Coalesce:
    """A citation's document: its snapshot, else (citations stored before the snapshot) its
    chunk's; NULL when neither is known."""
    return Coalesce("document_id_snapshot", "chunk__document_id")


def _drawn_on(**filters) -> list[QuerySet]:
    """The documents the messages selected by `filters` (on the message, through `message`)
    drew on, as two querysets of rows annotated `cited_document`: the record of what reached
    each (`DocumentGiven`) and, for safety, what each cites (`Citation`)
    (docs/decisions/0130-an-answer-records-what-it-was-given.md)."""
    given = DocumentGiven.objects.filter(**filters).annotate(cited_document=F("document_id"))
    cited = Citation.objects.filter(**filters).annotate(cited_document=_cited_document_id())
    return [given, cited]


def _document_readable(reader: Reader) -> Exists:
    """The rule (`documents_readable_filter`) on the document of the citation row annotated
    `cited_document`."""
    return Exists(
        Document.objects.filter(
            documents_readable_filter(user=reader), pk=OuterRef("cited_document")
        )
    )


def _drawing_on_others_files(rows: QuerySet, reader: Reader) -> QuerySet:
    """Those of `rows` (annotated `cited_document`) on someone else's personal file (present
    or purged): what a superuser, who reads every other document, may not read
    (docs/decisions/0081-personal-files.md)."""
    others = Document.objects.filter(personal_files_filter()).exclude(
        pk__in=sorted(reader.own_file_ids)
    )
    return rows.filter(Exists(others.filter(pk=OuterRef("cited_document"))))


def messages_withheld_filter(*, user: UserLike, prefix: str = "") -> Q:
    """The messages (through `prefix`, e.g. "messages__") whose text `user` may not read: a
    document whose text reached them (`DocumentGiven`) or that they cite is one `user` may not
    read (`knowledge.access`), or one that no longer exists (or is unknown: messages stored
    before the record). For a superuser, only those drawing on someone else's personal file;
    every message that drew on any document for someone who reads nothing.
    `messages_withheld` says why, for messages in hand."""
    reader = reader_for(user)
    drawn = _drawn_on(message_id=OuterRef(f"{prefix}pk"))
    if reader.is_superuser:
        if not reader.others_files:
            return Q(pk__in=[])
        drawn = [_drawing_on_others_files(rows, reader) for rows in drawn]
    elif not reader.reads_nothing:
        drawn = [rows.filter(~_document_readable(reader)) for rows in drawn]
    return Q(Exists(drawn[0])) | Q(Exists(drawn[1]))


def messages_withheld(
    *,
    user: UserLike,
    message_ids: Iterable[uuid.UUID] | None = None,
    conversation_id: uuid.UUID | str | None = None,
) -> dict[uuid.UUID, Withheld]:
    """{message id: why it is withheld from `user`} for the messages of `message_ids`, or of
    the conversation `conversation_id`, that `user` may not read (absent: readable). One query
    whatever the number of messages; for a superuser, only the messages drawing on someone
    else's personal file (`ACCESS`), and no query when there is none (`Reader.others_files`).

    A message is withheld when a document whose text reached it (its record,
    `DocumentGiven`: the passages it was given, the earlier turns and summary in its prompt,
    what its search query was built from) or one it cites (`Citation.document_id_snapshot`,
    the chunk may be gone) is one `user` may not read by `knowledge.access`: `ACCESS` when one
    of them is in a collection `user` may not read, else `WITHDRAWN` (disabled, expired or no
    longer processed, for a reader who does not manage documents; deleted or unknown, for
    anyone but a superuser, since its collection is no longer known). Decided from the
    documents as they are now: a revocation or a move is seen on the next call
    (docs/decisions/0130-an-answer-records-what-it-was-given.md).
    """
    reader = reader_for(user)
    message_ids = None if message_ids is None else list(message_ids)
    filters: dict = {}
    if conversation_id is not None:
        filters["message__conversation_id"] = conversation_id
    if message_ids is not None:
        filters["message_id__in"] = message_ids
    given, cited = _drawn_on(**filters)
    if reader.is_superuser:
        if not reader.others_files:
            return {}
        given, cited = (_drawing_on_others_files(rows, reader) for rows in (given, cited))
        drawn = given.values_list("message_id", flat=True).union(
            cited.values_list("message_id", flat=True)
        )
        return dict.fromkeys(drawn, Withheld.ACCESS)
    if reader.reads_nothing:
        drawn = given.values_list("message_id", flat=True).union(
            cited.values_list("message_id", flat=True)
        )
        return dict.fromkeys(drawn, Withheld.ACCESS)
    # One hand-written statement (chat/withheld_sql.py): compiling the same query with the ORM
    # cost more CPU than running it (docs/decisions/0151-one-reader-per-question.md).
    rows = withheld_rows(
        reader,
        conversation_id=conversation_id,
        message_ids=message_ids,
    )
    withheld: dict[uuid.UUID, Withheld] = {}
    for message_id, in_collection, exists in rows:
        if exists and not in_collection:
            withheld[message_id] = Withheld.ACCESS
        else:
            withheld.setdefault(message_id, Withheld.WITHDRAWN)
    return withheld


def row_withheld(row: MessageRow, reason: Withheld) -> MessageRow:
    """`row` as shown to a reader it is withheld from: the notice for text, and nothing of the
    answer (no citations, search query, searched document, warning or suggestions)."""
    return replace(
        row,
        content=reason.notice,
        mode="",
        suggestions=(),
        warning="",
        search_query="",
        searched_document_id=None,
        searched_document_title="",
        searched_documents=(),
        citations=(),
        withheld=str(reason),
    )


def rows_for_reader(
    rows: Sequence[MessageRow], withheld: dict[uuid.UUID, Withheld]
) -> list[MessageRow]:
    """`rows`, those of `withheld` replaced by what their reader sees (`row_withheld`)."""
    return [row_withheld(row, withheld[row.id]) if row.id in withheld else row for row in rows]


def citation_fresh() -> ExpressionWrapper:
    """SQL for "not stale" (`citation_is_stale` in the database): the cited chunk still
    exists with the very text cited, in an enabled, ready, unexpired document. NULL (not
    fresh) when the chunk is gone: its columns come from LEFT JOINs on primary keys."""
    return ExpressionWrapper(
        Q(
            not_expired("chunk__document__"),
            chunk__text=F("text"),
            chunk__document__enabled=True,
            chunk__document__status=Document.Status.READY,
        ),
        output_field=BooleanField(),
    )


def conversation_transcript(conversation: Conversation, *, user: UserLike) -> list[MessageRow]:
    """The conversation's messages in order with their citations, as rows, as `user` may read
    them: an answer drawing on a document `user` may not read is withheld (`row_withheld`).
    Three queries of plain values whatever the length (no model instances, the stale check done
    in SQL), none more for a superuser."""
    cited: dict[uuid.UUID, list[CitationRow]] = {}
    citations = (
        Citation.objects.filter(message__conversation=conversation)
        .annotate(fresh=citation_fresh())
        .order_by("message_id", "n")
        .values_list("message_id", *_CITATION_COLUMNS, "fresh")
    )
    for message_id, *values, fresh in citations:
        cited.setdefault(message_id, []).append(CitationRow(*values, stale=not fresh))
    messages = (
        conversation.messages.exclude(role__in=Message.HIDDEN_ROLES)
        .order_by("created_at", "id")
        .values_list(*_MESSAGE_COLUMNS)
    )
    rows = [
        MessageRow(
            *values[:_SUGGESTIONS],
            _suggestions(values[_SUGGESTIONS]),
            *values[_SUGGESTIONS + 1 :],
            citations=tuple(cited.get(values[0], ())),
        )
        for values in messages
    ]
    answered = any(row.role == Message.Role.ASSISTANT for row in rows)
    withheld = messages_withheld(user=user, conversation_id=conversation.pk) if answered else {}
    return rows_for_reader(rows, withheld)


def message_row(message: Message) -> MessageRow:
    """The row of a message instance (its citations loaded, ideally prefetched with
    `citations_with_source_state`, else one query here)."""
    return MessageRow(
        id=message.pk,
        role=message.role,
        content=message.content,
        status=message.status,
        reply_to_id=message.reply_to_id,
        mode=message.mode,
        suggestions=_suggestions(message.suggestions),
        warning=message.warning,
        search_query=message.search_query,
        searched_document_id=message.searched_document_id,
        searched_document_title=message.searched_document_title,
        searched_documents=tuple(message.searched_documents or ()),
        error_code=message.error_code,
        evidence=message.evidence,
        created_at=message.created_at,
        citations=tuple(
            CitationRow(
                *(getattr(citation, column) for column in _CITATION_COLUMNS),
                stale=citation_is_stale(citation),
            )
            for citation in sorted(message.citations.all(), key=lambda c: c.n)
        ),
    )


def message_get_for(user: AbstractBaseUser, message_id: uuid.UUID) -> Message:
    """A message of a conversation `user` may read (404 / 403 like its conversation); an
    answer withheld from `user` (`messages_withheld`) is answered like a message that does
    not exist (404)."""
    message = Message.objects.select_related("conversation").filter(pk=message_id).first()
    if message is None or messages_withheld(user=user, message_ids=[message_id]):
        raise AnswerError.not_found("There is no message with this id.")
    if conversation_access(user, message.conversation) == ConversationAccess.NONE:
        raise AnswerError.forbidden("This message belongs to a private conversation.")
    return message


def exchange_stored(
    *, conversation_id: uuid.UUID | str, question_id: uuid.UUID | str
) -> tuple[Message | None, Message | None]:
    """The question `question_id` stored in the conversation (None: never sent there) and its
    answer (None: not stored yet). One query when the question is not stored, else two."""
    question = Message.objects.filter(
        pk=question_id, role=Message.Role.USER, conversation_id=conversation_id
    ).first()
    if question is None:
        return None, None
    answer = Message.objects.filter(reply_to=question, role=Message.Role.ASSISTANT).first()
    return question, answer


def answer_id_of(
    question_id: uuid.UUID | str, *, conversation_id: uuid.UUID | str
) -> uuid.UUID | None:
    """The id of the question's stored answer in conversation `conversation_id`, None when
    there is none there (a question id of another conversation finds nothing)."""
    return (
        Message.objects.filter(
            reply_to_id=question_id,
            role=Message.Role.ASSISTANT,
            conversation_id=conversation_id,
        )
        .values_list("pk", flat=True)
        .first()
    )


def question_last_asked_by(user: AbstractBaseUser) -> str:
    """The text of the last question `user` asked, in any conversation ("" when none)."""
    return (
        Message.objects.filter(conversation__owner=user, role=Message.Role.USER)
        .order_by("-created_at")
        .values_list("content", flat=True)
        .first()
        or ""
    )


def message_answer_with_citations(
    answer_id: uuid.UUID | str, *, conversation_id: uuid.UUID | str | None = None
) -> Message | None:
    """The answer with its conversation and its citations (what tells stale ones
    prefetched), None when it does not exist (or, with `conversation_id`, is not in that
    conversation)."""
    found = Message.objects.filter(pk=answer_id)
    if conversation_id is not None:
        found = found.filter(conversation_id=conversation_id)
    return (
        found.select_related("conversation")
        .prefetch_related(Prefetch("citations", queryset=citations_with_source_state()))
        .first()
    )


def conversation_turns_before(
    question: Message, *, limit: int, asker: Reader | None = None
) -> list[Turn]:
    """The (at most `limit`) questions asked in `question`'s conversation before it, oldest
    first, each with what became of it: its answer's text, status, search query, cited
    documents and the documents whose text reached it (`DocumentGiven`); an answer its asker
    (the conversation's owner) may not read now (`messages_withheld`) as if it had not been
    answered. One query (the questions, their answers joined, the cited and given documents as
    arrays, the owner), two more when an answer drew on a document (the owner's reader, the
    answers withheld from them). `asker`: the `Reader` the request computed for the question's
    asker, used when they own the conversation (no query for the owner's reader)."""
    messages = connection.ops.quote_name(Message._meta.db_table)
    citations = connection.ops.quote_name(Citation._meta.db_table)
    given = connection.ops.quote_name(DocumentGiven._meta.db_table)
    conversations = connection.ops.quote_name(Conversation._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT a.id, q.content, a.status, a.content, a.search_query, "
            f"ARRAY(SELECT c.document_id_snapshot FROM {citations} c WHERE c.message_id = a.id "
            f"AND c.document_id_snapshot IS NOT NULL ORDER BY c.n), "
            f"ARRAY(SELECT g.document_id FROM {given} g WHERE g.message_id = a.id "
            f"ORDER BY g.document_id), "
            f"(SELECT owner_id FROM {conversations} WHERE id = %s) "
            f"FROM (SELECT id, content, created_at FROM {messages} WHERE conversation_id = %s "
            f"AND role = %s AND created_at < %s ORDER BY created_at DESC, id DESC LIMIT %s) q "
            f"LEFT JOIN {messages} a ON a.reply_to_id = q.id AND a.role = %s "
            f"ORDER BY q.created_at, q.id",
            [
                question.conversation_id, question.conversation_id, Message.Role.USER,
                question.created_at, limit, Message.Role.ASSISTANT,
            ],
        )  # fmt: skip
        rows = cursor.fetchall()
    withheld = _withheld_from_asker(
        rows[0][7] if rows else None,
        [row[0] for row in rows if row[0] is not None and (row[5] or row[6])],
        asker=asker,
    )
    return [
        _turn(content, status or "", answer or "", search_query or "", cited or (), drew or ())
        if answer_id not in withheld
        else _turn(content, "", "", "", (), ())
        for answer_id, content, status, answer, search_query, cited, drew, _ in rows
    ]


def _withheld_from_asker(
    owner_id: int | None, answer_ids: list[uuid.UUID], *, asker: Reader | None = None
) -> dict[uuid.UUID, Withheld]:
    """`messages_withheld` of the answers `answer_ids` for the conversation's owner `owner_id`
    (who asked them): none and no query when there are none. `asker`: a `Reader` the same
    request computed, used when it is the owner's (no query for the owner's reader)."""
    if not answer_ids:
        return {}
    if asker is not None and owner_id is not None and asker.user_id == owner_id:
        return messages_withheld(user=asker, message_ids=answer_ids)
    owner = get_user_model()(pk=owner_id)  # reader_for reads the user's flags by its pk
    return messages_withheld(user=owner, message_ids=answer_ids)


def _turn(
    question: str,
    status: str,
    answer: str,
    search_query: str,
    cited: Sequence[int],
    given: Sequence[int],
) -> Turn:
    complete = status == Message.Status.COMPLETE
    return Turn(
        question=question,
        search_query=search_query,
        answer=answer if complete else "",
        answered=complete,
        cited_document_ids=tuple(dict.fromkeys(cited)),
        # What a later answer given this turn (its answer, or only its search query) draws on.
        given_document_ids=tuple(sorted({*given, *cited})),
    )


def _turns_of(questions: list[tuple[uuid.UUID, str]]) -> list[tuple[uuid.UUID, Turn]]:
    """(id, Turn) of each (id, text) question, in the given order, an answer its asker may not
    read now (`_withheld_from_asker`) as if unanswered: three queries, three more when an
    answer drew on a document."""
    if not questions:
        return []
    answers = {
        reply_to: (answer_id, status, content, search_query)
        for answer_id, reply_to, status, content, search_query in Message.objects.filter(
            reply_to_id__in=[pk for pk, _ in questions], role=Message.Role.ASSISTANT
        ).values_list("id", "reply_to_id", "status", "content", "search_query")
    }
    answer_ids = [a[0] for a in answers.values()]
    cited: dict[uuid.UUID, list[int]] = {}
    for message_id, document_id in (
        Citation.objects.filter(message_id__in=answer_ids)
        .exclude(document_id_snapshot=None)
        .order_by("message_id", "n")
        .values_list("message_id", "document_id_snapshot")
    ):
        cited.setdefault(message_id, []).append(document_id)
    given: dict[uuid.UUID, list[int]] = {}
    for message_id, document_id in DocumentGiven.objects.filter(
        message_id__in=answer_ids
    ).values_list("message_id", "document_id"):
        given.setdefault(message_id, []).append(document_id)
    owner_id = Message.objects.filter(pk=questions[0][0]).values_list(
        "conversation__owner_id", flat=True
    )
    drew = {*cited, *given}
    withheld = _withheld_from_asker(owner_id.first(), list(drew)) if drew else {}
    turns = []
    for pk, content in questions:
        answer_id, status, answer, search_query = answers.get(pk, (None, "", "", ""))
        if answer_id in withheld:  # as if unanswered: its asker may not read it now
            answer_id, status, answer, search_query = None, "", "", ""
        turn = _turn(
            content, status, answer, search_query, cited.get(answer_id, ()),
            given.get(answer_id, ()),
        )  # fmt: skip
        turns.append((pk, turn))
    return turns


@dataclass(frozen=True)
class ConversationMemory:
    """What a generative answer remembers beyond its history window: the latest
    system-summary (its text, "" when none) and the questions older than the window that no
    summary has folded in yet ((id, Turn), oldest first); `summary_given`: the documents the
    summary drew on (its `DocumentGiven` record)."""

    summary: str
    unfolded: list[tuple[uuid.UUID, Turn]]
    summary_given: tuple[int, ...] = ()


def conversation_memory(
    question_id: uuid.UUID, *, window: int, limit: int = 40
) -> ConversationMemory:
    """The memory of the question's conversation before it, outside its last `window` turns
    (at most `limit` unfolded turns, the newest). A summary the conversation's owner may not
    read now (`messages_withheld`) is left out, as if never written."""
    question = Message.objects.filter(pk=question_id).values("conversation_id", "created_at")
    question = question.first()
    if question is None:
        return ConversationMemory("", [])
    earlier = Message.objects.filter(
        conversation_id=question["conversation_id"], created_at__lt=question["created_at"]
    )
    summary = (
        Message.objects.filter(
            conversation_id=question["conversation_id"],
            role=Message.Role.SYSTEM_SUMMARY,
            reply_to__created_at__lt=question["created_at"],
        )
        .order_by("-reply_to__created_at", "-created_at")
        .annotate(
            given=ArraySubquery(
                DocumentGiven.objects.filter(message_id=OuterRef("pk")).values("document_id")
            )
        )
        .values_list("content", "reply_to__created_at", "given", "pk", "conversation__owner_id")
        .first()
    )
    if summary is not None and _withheld_from_asker(summary[4], [summary[3]] if summary[2] else []):
        summary = None  # its asker may not read it now: the turns are folded again without it
    older = earlier.filter(role=Message.Role.USER)
    if summary is not None:
        older = older.filter(created_at__gt=summary[1])
    rows = list(
        older.order_by("-created_at", "-id").values_list("id", "content")[window : window + limit]
    )
    return ConversationMemory(
        summary[0] if summary else "",
        _turns_of(list(reversed(rows))),
        summary_given=tuple(summary[2]) if summary else (),
    )


def documents_list(user: AbstractBaseUser) -> list[dict]:
    """The documents `user` may read (`documents_visible_to`, the one read rule) with their
    collection's name and chunk counts, by title: the source as a file name or URL, never a
    path on the server; the processing error as `user` may read it (`document_error_for`).
    The organisation's documents only: personal files are listed by their own API
    (chat/api/files.py)."""
    documents = (
        documents_visible_to(reader_for(user))
        .exclude(personal_files_filter())
        .annotate(chunk_count=Count("chunks"))
    )
    return [
        {
            "id": document.pk,
            "title": document.title,
            "collection": document.collection.name,
            "source": document_source_label(document.source),
            "media_type": document.media_type,
            "status": document.status,
            "reprocessing": document.reprocessing_since is not None,
            "error": document_error_for(user, document),
            "enabled": document.enabled,
            "expires_at": document.expires_at,
            "is_expired": document.is_expired,
            "chunk_count": document.chunk_count,
            "url": document.url,
            "created_at": document.created_at,
            "updated_at": document.updated_at,
        }
        for document in documents
    ]


def unknown_document_ids(document_ids: list[int], *, reader: Reader) -> list[int]:
    """The ids of `document_ids` naming no document `reader` may read (sorted): to them, a
    document they may not read does not exist."""
    known = set(
        documents_readable(user=reader).filter(pk__in=document_ids).values_list("pk", flat=True)
    )
    return sorted(set(document_ids) - known)


def documents_file_state(document_ids: Iterable[int | None]) -> dict[int, bool]:
    """{document id: its original file can be opened} for the documents of `document_ids`
    that still exist, a purged personal file being gone (one query; none when there are no
    ids)."""
    ids = {pk for pk in document_ids if pk}
    if not ids:
        return {}
    documents = Document.objects.filter(pk__in=ids, purged_at__isnull=True).only(
        "pk", "file", "source"
    )
    return {document.pk: document_original_path(document) is not None for document in documents}


def messages_text(message_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
    """{message id: its text} for the messages of `message_ids` (one query)."""
    return dict(Message.objects.filter(pk__in=set(message_ids)).values_list("pk", "content"))


def ratings_given(
    user: AbstractBaseUser,
    *,
    conversation_id: uuid.UUID | None = None,
    message_ids: Sequence[uuid.UUID] = (),
) -> dict[uuid.UUID, int]:
    """{message id: the rating `user` gave it}, for the messages of the conversation
    `conversation_id` when given, else for `message_ids` (one query)."""
    given = Feedback.objects.filter(user=user)
    if conversation_id is not None:
        given = given.filter(message__conversation_id=conversation_id)
    else:
        given = given.filter(message__in=list(message_ids))
    return dict(given.values_list("message_id", "rating"))
