"""Writes of the chat: conversations, the messages of an exchange, feedback.

Synchronous functions, each in its own transaction; async callers (the answering pipeline, the
consumer) run them through `database_sync_to_async`. Idempotency is the database's job: a user
message's id is the client's idempotency key (primary key), and the unique constraint
`message_one_answer_per_question` allows one assistant answer per question, so concurrent
duplicates lose an INSERT race and then read what the winner stored.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models import AutoField, Field, Model, QuerySet
from django.utils import timezone

from chat.answering.questions import conversation_title_from, text_clean
from chat.citations import citation_build
from chat.errors import AnswerError
from chat.models import Citation, Conversation, DocumentGiven, Feedback, Message
from chat.selectors import ConversationAccess, conversation_access
from knowledge.models import Chunk
from knowledge.retrieval import RetrievedChunk
from knowledge.sql_arrays import bigint_array

TITLE_MAX_CHARS = 200

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExchangeClaim:
    """This request answers the question: `answer` is its assistant message, status streaming."""

    conversation: Conversation
    question: Message
    answer: Message
    new: bool = False  # the question created the conversation: it has no earlier turns


@dataclass(frozen=True)
class ExchangeExisting:
    """The question was asked before (same message id): `answer` is its stored answer."""

    conversation: Conversation
    question: Message
    answer: Message


# --- Conversations -------------------------------------------------------------------------------
def conversation_check_owner(conversation: Conversation, user: AbstractBaseUser) -> None:
    """Only the owner posts to, renames or deletes a conversation."""
    access = conversation_access(user, conversation)
    if access == ConversationAccess.NONE:
        raise AnswerError.forbidden("This conversation is private.")
    if access != ConversationAccess.OWNER:
        raise AnswerError.forbidden("Only the owner of this conversation can change it.")


def conversation_rename(
    *, conversation: Conversation, user: AbstractBaseUser, title: str
) -> Conversation:
    conversation_check_owner(conversation, user)
    cleaned = " ".join(text_clean(title).split())
    if not cleaned:
        raise AnswerError.validation("title", "The title is empty.")
    if len(cleaned) > TITLE_MAX_CHARS:
        raise AnswerError.validation(
            "title", f"The title is too long: the limit is {TITLE_MAX_CHARS} characters."
        )
    conversation.title = cleaned
    conversation.save(update_fields=["title", "updated_at"])
    return conversation


def conversation_delete(*, conversation: Conversation, user: AbstractBaseUser) -> None:
    conversation_check_owner(conversation, user)
    conversation.delete()


def conversation_clear(*, conversation: Conversation, user: AbstractBaseUser) -> int:
    """Delete every message of the conversation (questions, answers with their citations and
    ratings, the memory's summary), keeping the conversation itself: its title, privacy and
    attached files. Owner only (AnswerError 403); refused with 409 while an answer is being
    written (stop it first). Returns how many messages were deleted. Why:
    docs/decisions/0165-clear-conversation-and-the-page-details.md."""
    conversation_check_owner(conversation, user)
    answers_release_stale(conversation=conversation)
    messages = Message.objects.filter(conversation=conversation)
    with transaction.atomic():
        Conversation.objects.select_for_update().filter(pk=conversation.pk).update(
            updated_at=timezone.now()
        )
        if messages.filter(status=Message.Status.STREAMING).exists():
            raise AnswerError.conflict(
                "An answer is still being written in this conversation: stop it first."
            )
        count = messages.count()
        messages.delete()
    logger.info("conversation %s cleared: %s messages deleted", conversation.pk, count)
    return count


# --- Exchanges -----------------------------------------------------------------------------------
def exchange_begin(
    *,
    user: AbstractBaseUser,
    message_id: uuid.UUID,
    question: str,
    conversation_id: uuid.UUID | None,
    is_private: bool,
    mode: str,
    top_k: int,
) -> ExchangeClaim | ExchangeExisting:
    """Store the question and claim its answer, or find what an earlier request stored.

    The conversation (when new), the user message and the assistant message (status
    streaming) are created in one statement. A message id stored before, or by a concurrent
    request (which blocks on the primary key until this one commits), fails it with
    IntegrityError: nothing is stored (its conversation included) and the existing exchange
    is returned.
    """
    try:  # the usual case first: a new message id (nothing stored when it is not)
        return _exchange_insert(
            user=user, message_id=message_id, question=question,
            conversation_id=conversation_id, is_private=is_private, mode=mode, top_k=top_k,
        )  # fmt: skip
    except IntegrityError:
        existing = _question_get(message_id)
        if existing is None:
            raise
    return _exchange_existing(
        existing, user=user, question=question, conversation_id=conversation_id, mode=mode,
        top_k=top_k,
    )  # fmt: skip


def _rows_sql(objs: Sequence[Model]) -> tuple[list[str], str, list[Any]]:
    """The quoted columns, a typed VALUES list and its parameters for inserting the unsaved
    `objs` (all of one model) as Django's `save` would (defaults, `auto_now`: `pre_save`)."""
    fields, columns, row = _row_shape(type(objs[0]))
    params = [f.get_db_prep_save(f.pre_save(o, add=True), connection) for o in objs for f in fields]
    return list(columns), ", ".join([row] * len(objs)), params


@functools.cache
def _row_shape(model: type[Model]) -> tuple[tuple[Field, ...], tuple[str, ...], str]:
    """The fields `_rows_sql` writes of `model`, their quoted columns and one typed row of
    placeholders (the column types, `db_type`, worked out once per process)."""
    fields = tuple(f for f in model._meta.concrete_fields if not isinstance(f, AutoField))
    row = "(" + ", ".join(f"%s::{f.db_type(connection)}" for f in fields) + ")"
    return fields, tuple(connection.ops.quote_name(f.column) for f in fields), row


def _assignments_sql(model: type[Model], values: dict[str, Any]) -> tuple[str, list[Any]]:
    """The SET list and its parameters that `model.objects.filter(...).update(**values)` would
    send (each value prepared by its field, as the ORM's update does), written out: it runs for
    every answer (docs/decisions/0152-statements-written-out.md)."""
    assignments, params = [], []
    for name, value in values.items():
        field = model._meta.get_field(name)
        assignments.append(f"{connection.ops.quote_name(field.column)} = %s")
        params.append(field.get_db_prep_save(value, connection))
    return ", ".join(assignments), params


def _exchange_insert(
    *,
    user: AbstractBaseUser,
    message_id: uuid.UUID,
    question: str,
    conversation_id: uuid.UUID | None,
    is_private: bool,
    mode: str,
    top_k: int,
) -> ExchangeClaim:
    """`exchange_begin`'s writes in one SQL statement (atomic as any statement: a message id
    stored meanwhile fails it whole with IntegrityError, the conversation included): the
    conversation created, or only its `updated_at` moved if it exists and is the user's; the
    question and its answer (status streaming) when it is
    (docs/decisions/0048-an-exchange-stored-and-finished-in-one-statement.md). Raises
    AnswerError (forbidden) for another user's conversation."""
    conversation = Conversation(
        id=conversation_id or uuid.uuid4(),
        owner=user,
        is_private=is_private,
        title=conversation_title_from(question),
    )
    question_message = Message(
        id=message_id, conversation=conversation, role=Message.Role.USER, content=question
    )
    answer = Message(
        conversation=conversation,
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        reply_to=question_message,
        mode=mode,
        top_k=top_k,
    )
    conversation_columns, conversation_row, params = _rows_sql([conversation])
    _, _, question_params = _rows_sql([question_message])
    message_columns, message_row, answer_params = _rows_sql([answer])
    # The answer after its question, whatever the clock's resolution.
    answer.created_at = max(
        answer.created_at, question_message.created_at + timedelta(microseconds=1)
    )
    answer_params[message_columns.index('"created_at"')] = answer.created_at
    conversations = connection.ops.quote_name(Conversation._meta.db_table)
    messages = connection.ops.quote_name(Message._meta.db_table)
    names = ", ".join(message_columns)
    sql = (
        f"WITH conversation AS (INSERT INTO {conversations} ({', '.join(conversation_columns)}) "
        f"VALUES {conversation_row} ON CONFLICT (id) DO UPDATE SET "
        f"updated_at = EXCLUDED.updated_at WHERE {conversations}.owner_id = EXCLUDED.owner_id "
        f"RETURNING id, is_private, title, created_at, updated_at, xmax = 0 AS created), "
        f"question AS (INSERT INTO {messages} ({names}) SELECT v.* FROM conversation, "
        f"(VALUES {message_row}) AS v({names}) RETURNING id), "
        f"answer AS (INSERT INTO {messages} ({names}) SELECT v.* FROM question, "
        f"(VALUES {message_row}) AS v({names}) RETURNING id) "
        f"SELECT id, is_private, title, created_at, updated_at, created FROM conversation"
    )
    # Inside a caller's transaction (tests, evaluate) a savepoint keeps a failed statement
    # from aborting it; on its own (autocommit) the statement is its own transaction.
    guard = transaction.atomic() if connection.in_atomic_block else nullcontext()
    with guard, connection.cursor() as cursor:
        cursor.execute(sql, [*params, *question_params, *answer_params])
        row = cursor.fetchone()
    if row is None:  # the conversation exists and is someone else's
        conversation_check_owner(Conversation.objects.get(pk=conversation.pk), user)
        raise AnswerError.forbidden("This conversation belongs to someone else.")
    (
        conversation.id, conversation.is_private, conversation.title,
        conversation.created_at, conversation.updated_at, created,
    ) = row  # fmt: skip
    for instance in (conversation, question_message, answer):
        instance._state.adding, instance._state.db = False, connection.alias
    return ExchangeClaim(
        conversation=conversation, question=question_message, answer=answer, new=created
    )


def _question_get(message_id: uuid.UUID) -> Message | None:
    return Message.objects.select_related("conversation").filter(pk=message_id).first()


def _answer_create(question: Message, *, mode: str, top_k: int) -> Message:
    return Message.objects.create(
        conversation_id=question.conversation_id,
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        reply_to=question,
        mode=mode,
        top_k=top_k,
    )


def _exchange_existing(
    existing: Message,
    *,
    user: AbstractBaseUser,
    question: str,
    conversation_id: uuid.UUID | None,
    mode: str,
    top_k: int,
) -> ExchangeClaim | ExchangeExisting:
    """The earlier exchange of this message id, after checking the repeat really is one."""
    conversation = existing.conversation
    if (
        existing.role != Message.Role.USER
        or conversation_access(user, conversation) != ConversationAccess.OWNER
    ):
        raise AnswerError.conflict("This message_id is already used by another message.")
    if conversation_id is not None and conversation.pk != conversation_id:
        raise AnswerError.conflict(
            "This message_id was already sent to another conversation.",
            details={"conversation_id": str(conversation.pk)},
        )
    if existing.content != question:
        raise AnswerError.conflict("This message_id was already used for a different message.")
    with transaction.atomic():
        answer = _answer_of(existing)
        if answer is not None and answer.status == Message.Status.ERROR:
            answer_set_aside(answer)  # a retry answers again
            answer = None
        if answer is None:
            try:
                with transaction.atomic():
                    answer = _answer_create(existing, mode=mode, top_k=top_k)
                return ExchangeClaim(conversation=conversation, question=existing, answer=answer)
            except IntegrityError:  # a concurrent retry claimed it first
                answer = _answer_of(existing)
    return ExchangeExisting(conversation=conversation, question=existing, answer=answer)


def answer_set_aside(answer: Message) -> None:
    """Take a replaced answer out of its conversation: one anybody gave feedback on is kept as
    `Message.Role.SUPERSEDED` (its text, citations and feedback stay, for the admin's feedback
    review), any other is deleted. The caller holds the transaction that creates the new
    answer (docs/decisions/0092-superseded-answers.md)."""
    if Feedback.objects.filter(message=answer).exists():
        Message.objects.filter(pk=answer.pk).update(role=Message.Role.SUPERSEDED)
    else:
        answer.delete()


def _answer_of(question: Message) -> Message | None:
    return Message.objects.filter(reply_to=question, role=Message.Role.ASSISTANT).first()


def exchange_regenerate(
    *, user: AbstractBaseUser, message_id: uuid.UUID, mode: str, top_k: int
) -> ExchangeClaim:
    """Answer an earlier question again, replacing its answer (owner only; not while the
    question is still being answered). The replaced answer is set aside (`answer_set_aside`)."""
    with transaction.atomic():
        question = (
            Message.objects.select_for_update()
            .select_related("conversation")
            .filter(pk=message_id, role=Message.Role.USER)
            .first()
        )
        if question is None:
            raise AnswerError.not_found("There is no question with this message_id.")
        conversation_check_owner(question.conversation, user)
        previous = _answer_of(question)
        if previous is not None:
            previous = answer_release_if_stale(previous)
        if previous is not None and previous.status == Message.Status.STREAMING:
            raise AnswerError.conflict("This question is still being answered.")
        if previous is not None:
            answer_set_aside(previous)
        answer = _answer_create(question, mode=mode, top_k=top_k)
        Conversation.objects.filter(pk=question.conversation_id).update(updated_at=timezone.now())
    return ExchangeClaim(conversation=question.conversation, question=question, answer=answer)


def answer_refresh(answer_id: uuid.UUID) -> Message | None:
    return Message.objects.filter(pk=answer_id).first()


# An answer still `streaming` whose heartbeat is this old was left so by a process that died:
# a live one renews it every HEARTBEAT_SECONDS (`answer_heartbeat`, from the pipeline), and
# a server that starts releases those at once
# (docs/decisions/0106-stuck-states-and-stop-frames.md).
HEARTBEAT_SECONDS = 10
STALE_STREAMING = timedelta(seconds=45)


def _stale_streaming(stale_after: timedelta) -> QuerySet[Message]:
    return Message.objects.filter(
        status=Message.Status.STREAMING, heartbeat_at__lt=timezone.now() - stale_after
    )


def answer_heartbeat(answer_id: uuid.UUID) -> bool:
    """Renew the heartbeat of an answer still `streaming` (the caller is answering it);
    False when it is no longer streaming."""
    return bool(
        Message.objects.filter(pk=answer_id, status=Message.Status.STREAMING).update(
            heartbeat_at=timezone.now()
        )
    )


def answers_release_stale(
    *, conversation: Conversation | None = None, stale_after: timedelta = STALE_STREAMING
) -> int:
    """Mark interrupted every answer left `streaming` longer than `stale_after` by a process
    that died (only those of `conversation`, when given), so that its page stops showing it
    as being typed and its question can be answered again. Returns how many."""
    stale = _stale_streaming(stale_after)
    if conversation is not None:
        stale = stale.filter(conversation=conversation)
    return stale.update(status=Message.Status.INTERRUPTED)


def answers_release_stale_at_startup() -> int:
    """`answers_release_stale` for a server that starts: a database that is not reachable yet
    is logged, not raised (the answers are released on read anyway)."""
    try:
        released = answers_release_stale()
    except DatabaseError as exc:
        logger.warning("Could not release answers left streaming at startup: %s", exc)
        return 0
    if released:
        logger.info("Released %s answer(s) left streaming by a process that stopped", released)
    return released


def answer_release_if_stale(
    answer: Message, *, stale_after: timedelta = STALE_STREAMING
) -> Message:
    """An answer left `streaming` by a process that died is marked interrupted."""
    if _stale_streaming(stale_after).filter(pk=answer.pk).update(status=Message.Status.INTERRUPTED):
        answer.refresh_from_db()
    return answer


@dataclass(frozen=True)
class AnswerFigures:
    top_k: int | None = None
    best_similarity: float | None = None
    retrieval_ms: float | None = None
    first_event_ms: float | None = None
    total_ms: float | None = None


def answer_finish(
    *,
    answer_id: uuid.UUID,
    status: str,
    content: str,
    cited: Sequence[tuple[int, RetrievedChunk]] = (),
    figures: AnswerFigures = AnswerFigures(),  # noqa: B008 (frozen, never mutated)
    suggestions: Sequence[str] = (),
    warning: str = "",
    search_query: str = "",
    error_code: str = "",
    searched_document: tuple[int, str] | None = None,
    searched_documents: Sequence[dict[str, int | str]] = (),
    evidence: str = "",
    given: Sequence[int] = (),
    answer: Message | None = None,
) -> list[Citation] | None:
    """Store the outcome of a streaming answer with its citations, in one statement.
    `evidence`: the evidence check's verdict on a complete answer (Message.Evidence).
    `given`: the ids of the documents whose text reached the answer; they and the cited
    documents are added to its record (`DocumentGiven`) in the same statement, to what
    `answer_given_record` wrote before its first word
    (docs/decisions/0130-an-answer-records-what-it-was-given.md).

    Only an answer still `streaming` is finished (a late interruption never overwrites a
    complete answer). Returns the stored citations, or None when the answer was already
    finished or no longer exists. A cited chunk deleted meanwhile keeps its snapshot.
    `searched_document`: (id, title) of the document the question named and the answer was
    searched in alone (chat/answering/named_documents.py); `searched_documents` every one of
    them (`{id, title}`), when the question named them. `answer`: the answer's instance (the
    exchange's claim), its fields set to what was stored when it is finished.
    """
    fields: dict[str, Any] = {
        "status": status,
        "content": content,
        "suggestions": list(suggestions),
        "warning": warning,
        "search_query": search_query,
        "error_code": error_code,
        "searched_document_id": searched_document[0] if searched_document else None,
        "searched_document_title": searched_document[1] if searched_document else "",
        "searched_documents": list(searched_documents),
        "evidence": evidence,
        **{name: value for name, value in vars(figures).items() if value is not None},
    }
    stored = Message(pk=answer_id, **fields)
    citations = [citation_build(message=stored, n=n, chunk=chunk) for n, chunk in cited]
    drew_on = sorted({*given, *(chunk.document_id for _, chunk in cited)})
    finished, alive = _answer_finish_statement(answer_id, fields, citations, drew_on)
    if not finished:
        return None
    for citation in citations:
        if citation.n not in alive:
            citation.chunk_id = None
    if answer is not None:
        for name, value in fields.items():
            setattr(answer, name, value)
    return citations


def _answer_finish_statement(
    answer_id: uuid.UUID, fields: dict[str, Any], citations: list[Citation], given: list[int]
) -> tuple[bool, set[int]]:
    """`answer_finish`'s writes in one SQL statement, atomic as any statement
    (docs/decisions/0048-an-exchange-stored-and-finished-in-one-statement.md): the
    conditional UPDATE of the answer (it waits for a
    concurrent finisher's commit, then finds the answer no longer streaming), then, only if it
    matched, the citations (a chunk deleted meanwhile cited as NULL, keeping its snapshot)
    and the conversation's `updated_at`, and the documents `given` added to its record.
    Returns whether the answer was finished and the numbers of the citations whose chunk
    still exists."""
    assignments, params = _assignments_sql(Message, fields)
    messages = connection.ops.quote_name(Message._meta.db_table)
    conversations = connection.ops.quote_name(Conversation._meta.db_table)
    sql = [
        f"WITH answer AS (UPDATE {messages} SET {assignments} WHERE id = %s AND status = %s "
        "RETURNING conversation_id)"
    ]
    params.extend([answer_id, Message.Status.STREAMING])
    if citations:
        table = connection.ops.quote_name(Citation._meta.db_table)
        chunks = connection.ops.quote_name(Chunk._meta.db_table)
        columns, rows, citation_params = _rows_sql(citations)
        chunk_column = connection.ops.quote_name(Citation._meta.get_field("chunk").column)
        selected = [
            f"(SELECT k.id FROM {chunks} k WHERE k.id = v.{name})"
            if name == chunk_column
            else f"v.{name}"
            for name in columns
        ]
        sql.append(
            f", cited AS (INSERT INTO {table} ({', '.join(columns)}) "
            f"SELECT {', '.join(selected)} FROM answer, "
            f"(VALUES {rows}) AS v({', '.join(columns)}) "
            f"RETURNING n, chunk_id)"
        )
        params.extend(citation_params)
    else:
        sql.append(", cited AS (SELECT NULL::smallint AS n, NULL::bigint AS chunk_id LIMIT 0)")
    if given:
        sql.append(
            f", given AS (INSERT INTO {_GIVEN} (message_id, document_id) "
            f"SELECT %s, d FROM (SELECT 1 FROM answer LIMIT 1) a, unnest(%s::bigint[]) d "
            f"ON CONFLICT DO NOTHING RETURNING 1)"
        )
        params.extend([answer_id, bigint_array(given)])
    sql.append(
        f", touched AS (UPDATE {conversations} SET updated_at = %s "
        f"WHERE id IN (SELECT conversation_id FROM answer) RETURNING 1) "
        f"SELECT EXISTS (SELECT 1 FROM answer), "
        f"(SELECT array_agg(n) FROM cited WHERE chunk_id IS NOT NULL)"
    )
    params.append(timezone.now())
    with connection.cursor() as cursor:
        cursor.execute("".join(sql), params)
        finished, alive = cursor.fetchone()
    return bool(finished), set(alive or ())


_GIVEN = connection.ops.quote_name(DocumentGiven._meta.db_table)
_GIVEN_INSERT = (
    f"INSERT INTO {_GIVEN} (message_id, document_id) SELECT %s, unnest(%s::bigint[]) "
    f"ON CONFLICT DO NOTHING"
)


def answer_given_record(*, answer_id: uuid.UUID, document_ids: Sequence[int]) -> None:
    """Record that the text of the documents `document_ids` reached the answer `answer_id`
    (its passages given to the answerer, the earlier turns and summary in its prompt, the
    turns behind its search query): one INSERT, run before the answer's first word is sent,
    so that an answer stopped or failed at any point has its record
    (docs/decisions/0130-an-answer-records-what-it-was-given.md). None: no statement."""
    if not document_ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(_GIVEN_INSERT, [answer_id, bigint_array(sorted(set(document_ids)))])


# --- Memory -------------------------------------------------------------------------------------
def conversation_summary_store(
    *, covers_question_id: uuid.UUID, content: str, given: Sequence[int] = ()
) -> Message:
    """Store a system-summary of the conversation up to and including the question
    `covers_question_id` (its `reply_to`): what a generative answer remembers of turns older
    than its history window. Earlier summaries are kept (the latest one is used). `given`: the
    documents the summarised turns and the earlier summary drew on, its record
    (`DocumentGiven`), written in the same statement."""
    question = Message.objects.only("conversation_id").get(pk=covers_question_id)
    summary = Message(
        conversation_id=question.conversation_id,
        role=Message.Role.SYSTEM_SUMMARY,
        status=Message.Status.COMPLETE,
        reply_to_id=covers_question_id,
        mode=Message.Mode.GENERATIVE,
        content=content,
    )
    columns, row, params = _rows_sql([summary])
    messages = connection.ops.quote_name(Message._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH summary AS (INSERT INTO {messages} ({', '.join(columns)}) VALUES {row} "
            f"RETURNING id), given AS (INSERT INTO {_GIVEN} (message_id, document_id) "
            f"SELECT summary.id, d FROM summary, unnest(%s::bigint[]) d "
            f"ON CONFLICT DO NOTHING) SELECT id FROM summary",
            [*params, bigint_array(sorted(set(given)))],
        )
    summary._state.adding, summary._state.db = False, connection.alias
    return summary


# --- Feedback ------------------------------------------------------------------------------------
def feedback_give(
    *, user: AbstractBaseUser, message: Message, rating: int, comment: str = ""
) -> Feedback:
    """One rating per user and answer; giving it again replaces it. Raises AnswerError
    (not-found) when `message` is not an answer: feedback is given on answers only, and the
    id of a question names no answer (docs/decisions/0105-schema-valid-requests-accepted.md);
    an answer replaced since (superseded, hidden from the conversation) takes no new rating."""
    if message.role == Message.Role.SUPERSEDED:
        raise AnswerError.not_found(
            "This answer has been replaced by a newer one; rate that one instead."
        )
    if message.role != Message.Role.ASSISTANT:
        raise AnswerError.not_found(
            "There is no answer with this id: feedback is given on answers only."
        )
    feedback, _ = Feedback.objects.update_or_create(
        user=user, message=message, defaults={"rating": rating, "comment": text_clean(comment)}
    )
    return feedback
