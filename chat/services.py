"""Writes of the chat: conversations, the messages of an exchange, feedback.

Synchronous functions, each in its own transaction; async callers (the answering pipeline, the
consumer) run them through `database_sync_to_async`. Idempotency is the database's job: a user
message's id is the client's idempotency key (primary key), and the unique constraint
`message_one_answer_per_question` allows one assistant answer per question, so concurrent
duplicates lose an INSERT race and then read what the winner stored.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import QuerySet, Subquery
from django.utils import timezone

from chat.answering.citations import citation_build
from chat.answering.errors import AnswerError
from chat.answering.questions import conversation_title_from, text_clean
from chat.models import Citation, Conversation, Feedback, Message
from chat.selectors import ConversationAccess, conversation_access
from knowledge.models import Chunk
from knowledge.retrieval import RetrievedChunk

TITLE_MAX_CHARS = 200

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExchangeClaim:
    """This request answers the question: `answer` is its assistant message, status streaming."""

    conversation: Conversation
    question: Message
    answer: Message


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


def _conversation_for_post(
    *,
    user: AbstractBaseUser,
    conversation_id: uuid.UUID | None,
    is_private: bool,
    first_message: str,
) -> Conversation:
    """The conversation a new question goes to, created when it does not exist yet (the client
    may choose the id of a new conversation). Runs inside the caller's transaction."""
    title = conversation_title_from(first_message)
    if conversation_id is None:
        return Conversation.objects.create(owner=user, is_private=is_private, title=title)
    conversation = Conversation.objects.filter(pk=conversation_id).first()
    if conversation is None:
        try:
            with transaction.atomic():
                conversation = Conversation.objects.create(
                    id=conversation_id, owner=user, is_private=is_private, title=title
                )
        except IntegrityError:  # created by a concurrent request: use it
            conversation = Conversation.objects.get(pk=conversation_id)
    conversation_check_owner(conversation, user)
    return conversation


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
    streaming) are created in one transaction. A concurrent request with the same message id
    blocks on the primary key until this one commits, then fails with IntegrityError, rolls
    back (its conversation included) and returns the existing exchange.
    """
    existing = _question_get(message_id)
    if existing is None:
        try:
            with transaction.atomic():
                conversation = _conversation_for_post(
                    user=user,
                    conversation_id=conversation_id,
                    is_private=is_private,
                    first_message=question,
                )
                question_message = Message.objects.create(
                    id=message_id,
                    conversation=conversation,
                    role=Message.Role.USER,
                    content=question,
                )
                answer = _answer_create(question_message, mode=mode, top_k=top_k)
                Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
            return ExchangeClaim(
                conversation=conversation, question=question_message, answer=answer
            )
        except IntegrityError:
            existing = _question_get(message_id)
            if existing is None:
                raise
    return _exchange_existing(
        existing, user=user, question=question, conversation_id=conversation_id, mode=mode,
        top_k=top_k,
    )  # fmt: skip


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
            answer.delete()  # nothing worth keeping: a retry answers again
            answer = None
        if answer is None:
            try:
                with transaction.atomic():
                    answer = _answer_create(existing, mode=mode, top_k=top_k)
                return ExchangeClaim(conversation=conversation, question=existing, answer=answer)
            except IntegrityError:  # a concurrent retry claimed it first
                answer = _answer_of(existing)
    return ExchangeExisting(conversation=conversation, question=existing, answer=answer)


def _answer_of(question: Message) -> Message | None:
    return Message.objects.filter(reply_to=question, role=Message.Role.ASSISTANT).first()


def exchange_regenerate(
    *, user: AbstractBaseUser, message_id: uuid.UUID, mode: str, top_k: int
) -> ExchangeClaim:
    """Answer an earlier question again, replacing its answer (owner only; not while the
    question is still being answered)."""
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
            previous.delete()
        answer = _answer_create(question, mode=mode, top_k=top_k)
        Conversation.objects.filter(pk=question.conversation_id).update(updated_at=timezone.now())
    return ExchangeClaim(conversation=question.conversation, question=question, answer=answer)


def answer_refresh(answer_id: uuid.UUID) -> Message | None:
    return Message.objects.filter(pk=answer_id).first()


# An answer still `streaming` this long after it was created was left so by a process that
# died (a live one finishes or is interrupted well before).
STALE_STREAMING = timedelta(minutes=10)


def _stale_streaming(stale_after: timedelta) -> QuerySet[Message]:
    return Message.objects.filter(
        status=Message.Status.STREAMING, created_at__lt=timezone.now() - stale_after
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
) -> list[Citation] | None:
    """Store the outcome of a streaming answer with its citations, in one transaction.

    Only an answer still `streaming` is finished (a late interruption never overwrites a
    complete answer). Returns the stored citations, or None when the answer was already
    finished or no longer exists. A cited chunk deleted meanwhile keeps its snapshot.
    """
    fields: dict[str, Any] = {
        "status": status,
        "content": content,
        "suggestions": list(suggestions),
        "warning": warning,
        "search_query": search_query,
        "error_code": error_code,
        **{name: value for name, value in vars(figures).items() if value is not None},
    }
    with transaction.atomic():
        # One conditional UPDATE (it waits for a concurrent finisher's commit, then finds the
        # answer no longer streaming) rather than a locking read and a save of every column.
        if not Message.objects.filter(pk=answer_id, status=Message.Status.STREAMING).update(
            **fields
        ):
            return None
        answer = Message(pk=answer_id, **fields)
        citations = [citation_build(message=answer, n=n, chunk=chunk) for n, chunk in cited]
        alive = set(
            Chunk.objects.filter(pk__in=[c.chunk_id for c in citations]).values_list(
                "pk", flat=True
            )
        )
        for citation in citations:
            if citation.chunk_id not in alive:
                citation.chunk_id = None
        Citation.objects.bulk_create(citations)
        Conversation.objects.filter(
            pk=Subquery(Message.objects.filter(pk=answer_id).values("conversation_id")[:1])
        ).update(updated_at=timezone.now())
    return citations


# --- Memory -------------------------------------------------------------------------------------
def conversation_summary_store(*, covers_question_id: uuid.UUID, content: str) -> Message:
    """Store a system-summary of the conversation up to and including the question
    `covers_question_id` (its `reply_to`): what a generative answer remembers of turns older
    than its history window. Earlier summaries are kept (the latest one is used)."""
    question = Message.objects.only("conversation_id").get(pk=covers_question_id)
    return Message.objects.create(
        conversation_id=question.conversation_id,
        role=Message.Role.SYSTEM_SUMMARY,
        status=Message.Status.COMPLETE,
        reply_to_id=covers_question_id,
        mode=Message.Mode.GENERATIVE,
        content=content,
    )


# --- Feedback ------------------------------------------------------------------------------------
def feedback_give(
    *, user: AbstractBaseUser, message: Message, rating: int, comment: str = ""
) -> Feedback:
    """One rating per user and answer; giving it again replaces it."""
    if message.role != Message.Role.ASSISTANT:
        raise AnswerError.validation("message", "Feedback is given on answers only.")
    feedback, _ = Feedback.objects.update_or_create(
        user=user, message=message, defaults={"rating": rating, "comment": text_clean(comment)}
    )
    return feedback
