"""The one answering pipeline: a question in, a sequence of events out. Transports only render.

    async for event in answer_stream(user=..., question=..., message_id=..., options=...):
        ...  # event.type, event.data

The steps, in `answer_stream`'s order: 1. validate the request; 2. store the exchange (the
question and its answer, status streaming) and read the conversation's previous turns; 3. plan
the search from the conversation (a follow-up is read in context: chat/answering/followups.py);
4. retrieve; 5. check the evidence (refuse, or try the plan's fallback once first); 6. answer:
the answerer of the mode writes the text (chat/answering/answerers.py); 7. store and finish.

Before the first event, bad input or access raises `AnswerError` (code, message, status,
details): validation-failed 422 (empty or too long message, top_k outside 1..20, embedding not
384 finite numbers, unknown document ids), bad-request 400 (malformed UUID), forbidden 403
(someone else's conversation), not-found 404 (regenerating an unknown question), conflict 409
(the message_id was used for something else, or its answer is still streaming after
settings.CHAT_ANSWER_WAIT_SECONDS). Nothing is stored in those cases.

Then the events, in order (SPEC §6; `data` shown):

- `warning {message}` — optional, first: the question was longer than the embedding model
  reads, only its beginning was embedded (also stored as `Message.warning`); or, right before
  `answer_start`, why the admin's generative mode is not used for this answer (no model
  configured, circuit open: chat/answering/generative.py); or, after the last delta, that the
  model's answer cites no source ("Not grounded in the documents"). All stored, joined.
- either `refusal {conversation_id, message_id, reply_to, message, suggestions,
  search_query}` — alone and
  last: the knowledge base is empty, or the evidence check finds no close enough passage
  (below the admin's threshold, or short of the further margins of
  chat/answering/evidence_signals.py; SPEC §4 texts); stored as an assistant message with status
  `refused`;
- or `answer_start {conversation_id, message_id, reply_to, title, is_private, search_query}` →
  `answer_delta {text}` (one or more; joined they are the answer's content, each sentence
  followed by its marker " [n]") → `sources {message_id, citations: [{n, chunk_id,
  document_id, title, page, section, url, excerpt, text, similarity, stale}]}` →
  `answer_end {message_id, status}`.
- `error {code, message}` — last, when answering failed after it started (status `error`):
  `upstream-unavailable` when the language model could not answer (before `answer_start` when
  no reply could start: the API's 503; after some deltas when it broke off, the partial
  answer kept), `internal` otherwise.

`search_query` is what retrieval searched for: the question as typed, or a follow-up read with
its conversation's context (also `Message.search_query` and the log line).
`message_id` in the events is the assistant message's id, `reply_to` the question's (the
client's message_id). The same message_id again (a retry, a second tab, concurrently) answers
nothing new: it waits while the first request is still streaming, then replays what was
stored as the same events (the content as one delta). `options.regenerate` answers a stored
question again, replacing its answer (owner only).

Cancelling the consuming task (client disconnect, Stop) or closing the generator stores the
part already streamed with status `interrupted`, its citations limited to the markers already
sent, and re-raises. One JSON log line per exchange goes to the `sourced.exchange` logger.

The embedding model runs in worker threads (never on the event loop); database work runs via
`database_sync_to_async`, each step one transaction inside `chat.services`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import InterfaceError, OperationalError

from chat import selectors, services
from chat.answering.answerers import (
    Answerer,
    AnswerFailed,
    AnswerRequest,
    ExtractiveAnswerer,
    WrittenAnswer,
)
from chat.answering.citations import citation_as_dict
from chat.answering.errors import AnswerError
from chat.answering.events import Event
from chat.answering.evidence import (
    EMPTY_KB_REFUSAL,
    NO_EVIDENCE_REFUSAL,
    Refusal,
    chat_settings_get,
    evidence_threshold,
)
from chat.answering.evidence_signals import THRESHOLD_ON, evidence_assess_async, evidence_outcome
from chat.answering.extractive import sentence_vectors_preload
from chat.answering.followups import (
    SearchPlan,
    Turn,
    leans_on_conversation,
    search_plan_in_context,
    unknown_own_terms,
)
from chat.answering.generative import GenerativeAnswerer, answering_mode, search_plan_generative
from chat.answering.questions import question_normalize
from chat.models import Message
from knowledge import embedding
from knowledge.retrieval import (
    TOP_K_MAX,
    TOP_K_MIN,
    RetrievedChunk,
    SearchResult,
    chunks_search,
    knowledge_base_is_empty,
)

logger = logging.getLogger("sourced.exchange")
errors_logger = logging.getLogger(__name__)

TRUNCATION_WARNING = (
    "Your question is longer than the search model can read ({limit} word pieces): only its "
    "beginning was used to find sources."
)
INTERNAL_ERROR_MESSAGE = "Something went wrong while answering. Please try again."
UNAVAILABLE_MESSAGE = (
    "The knowledge base is unavailable for a moment. What was answered so far is kept; "
    "please try again shortly."
)
MAX_DOCUMENT_IDS = 200
POLL_SECONDS = 0.1
# Previous turns read for a follow-up question (enough to find where its topic began).
FOLLOWUP_TURNS = 10


@dataclass(frozen=True)
class AnswerOptions:
    """How to answer: top_k (1..20, default ChatSettings.default_top_k), only these documents,
    a question embedding supplied by the client (384 floats) instead of embedding the question
    on the server (used when the question is searched as written; a follow-up read in context
    is embedded on the server), or regenerate the answer of an earlier question
    (`message_id`)."""

    top_k: int | None = None
    document_ids: list[int] | None = None
    embedding: list[float] | None = None
    regenerate: bool = False


@dataclass(frozen=True)
class _Request:
    """A validated request (step 1)."""

    user: AbstractBaseUser
    message_id: uuid.UUID
    conversation_id: uuid.UUID | None
    is_private: bool
    question: str | None  # None when regenerating: the stored question is answered
    top_k: int | None
    document_ids: list[int] | None
    supplied_vector: np.ndarray | None
    regenerate: bool


@dataclass(frozen=True)
class _Stored:
    """The exchange as stored (step 2): the settings it runs with, the claim on its answer (or
    the earlier exchange of the same message id) and the conversation's previous turns."""

    top_k: int
    threshold: float
    mode: str
    begun: services.ExchangeClaim | services.ExchangeExisting
    history: list[Turn]
    notice: str = ""  # why the answer is not in the admin's mode (chat/answering/generative.py)
    max_history_turns: int = 6


@dataclass(frozen=True)
class _Found:
    """What the search found (steps 3-5): the query used, the qualifying chunks, or why not."""

    query: str
    contextual: bool
    query_vector: np.ndarray | None
    qualifying: list[RetrievedChunk]
    refusal: Refusal | None


@dataclass
class _Exchange:
    """What one exchange has done so far: for the interruption record and the log line."""

    started: float = field(default_factory=time.perf_counter)
    first_event_ms: float | None = None
    retrieval_ms: float | None = None
    best_similarity: float | None = None
    evidence: str | None = None  # the evidence decision's reason (evidence_signals.Reason)
    search_query: str = ""
    contextual: bool = False
    warning: str = ""
    answerer: Answerer | None = None

    def warn(self, text: str) -> None:
        self.warning = f"{self.warning} {text}" if self.warning else text

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 1)

    def event(self, type_: str, data: dict[str, Any]) -> Event:
        if self.first_event_ms is None:
            self.first_event_ms = self.elapsed_ms()
        return Event(type_, data)  # type: ignore[arg-type]

    def figures(self, top_k: int) -> services.AnswerFigures:
        return services.AnswerFigures(
            top_k=top_k,
            best_similarity=self.best_similarity,
            retrieval_ms=self.retrieval_ms,
            first_event_ms=self.first_event_ms,
            total_ms=self.elapsed_ms(),
        )

    def written(self, *, complete: bool) -> WrittenAnswer:
        if self.answerer is None:
            return WrittenAnswer(content="", cited=[])
        return self.answerer.written(complete=complete)


# --- Step 1: validate ----------------------------------------------------------------------------
def _uuid(value: object, name: str) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        raise AnswerError.bad_request(
            f"{name} is not a valid UUID.", details={name: ["Must be a valid UUID."]}
        ) from None


def _top_k_validate(top_k: object) -> int | None:
    if top_k is None:
        return None
    if (
        isinstance(top_k, bool)
        or not isinstance(top_k, int)
        or not (TOP_K_MIN <= top_k <= TOP_K_MAX)
    ):
        raise AnswerError.validation(
            "top_k", f"top_k must be a whole number from {TOP_K_MIN} to {TOP_K_MAX}."
        )
    return top_k


def _embedding_validate(values: Sequence[float] | None) -> np.ndarray | None:
    if values is None:
        return None
    message = f"embedding must be a list of {embedding.DIMENSIONS} finite numbers, not all zero."
    if isinstance(values, (str, bytes)) or len(values) != embedding.DIMENSIONS:
        raise AnswerError.validation("embedding", message)
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        raise AnswerError.validation("embedding", message)
    vector = np.asarray(values, dtype=np.float64)
    # Scaled by its largest value first: a vector of huge (or tiny) finite numbers is still a
    # direction, and its norm must not overflow (or underflow) to inf (or 0).
    scale = float(np.max(np.abs(vector))) if np.all(np.isfinite(vector)) else math.nan
    if not math.isfinite(scale) or scale == 0.0:
        raise AnswerError.validation("embedding", message)
    vector = vector / scale
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def _document_ids_validate(values: Sequence[int] | None) -> list[int] | None:
    if values is None:
        return None
    if (
        isinstance(values, (str, bytes))
        or len(values) > MAX_DOCUMENT_IDS
        or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values)
    ):
        raise AnswerError.validation(
            "document_ids",
            f"document_ids must be a list of at most {MAX_DOCUMENT_IDS} document ids.",
        )
    return sorted(set(values))


def _request_validate(
    *,
    user: AbstractBaseUser,
    question: str | None,
    message_id: uuid.UUID | str,
    conversation_id: uuid.UUID | str | None,
    is_private: bool,
    options: AnswerOptions,
) -> _Request:
    """Every input checked before anything is stored (AnswerError otherwise)."""
    return _Request(
        user=user,
        message_id=_uuid(message_id, "message_id"),
        conversation_id=(
            None if conversation_id is None else _uuid(conversation_id, "conversation_id")
        ),
        is_private=is_private,
        question=None if options.regenerate else question_normalize(question),
        top_k=_top_k_validate(options.top_k),
        document_ids=_document_ids_validate(options.document_ids),
        supplied_vector=_embedding_validate(options.embedding),
        regenerate=options.regenerate,
    )


# --- Step 2: store the exchange (one database round trip) ---------------------------------------
def _exchange_store(request: _Request) -> _Stored:
    """Check the document filter, read the settings, store (or find) the exchange and read the
    conversation's previous turns."""
    if request.document_ids:
        unknown = selectors.unknown_document_ids(request.document_ids)
        if unknown:
            raise AnswerError.validation(
                "document_ids", f"Unknown document ids: {', '.join(map(str, unknown))}."
            )
    chat_settings = chat_settings_get()
    top_k = request.top_k or chat_settings.default_top_k
    choice = answering_mode(chat_settings.generation_mode)
    mode = choice.mode
    if request.regenerate:
        begun = services.exchange_regenerate(
            user=request.user, message_id=request.message_id, mode=mode, top_k=top_k
        )
    else:
        begun = services.exchange_begin(
            user=request.user,
            message_id=request.message_id,
            question=request.question,
            conversation_id=request.conversation_id,
            is_private=request.is_private,
            mode=mode,
            top_k=top_k,
        )
    history = []
    if isinstance(begun, services.ExchangeClaim) and not begun.new:
        history = selectors.conversation_turns_before(
            begun.question, limit=max(chat_settings.max_history_turns, FOLLOWUP_TURNS)
        )
    return _Stored(
        top_k=top_k,
        threshold=evidence_threshold(chat_settings),
        mode=mode,
        begun=begun,
        history=history,
        notice=choice.notice,
        max_history_turns=chat_settings.max_history_turns,
    )


def answerer_for(mode: str) -> Answerer:
    """A new answerer for `mode` (a `Message.Mode`)."""
    if mode == Message.Mode.EXTRACTIVE:
        return ExtractiveAnswerer()
    if mode == Message.Mode.GENERATIVE:
        return GenerativeAnswerer()
    raise ValueError(f"no answerer for mode {mode!r}")


# --- Steps 3-5: the search query, retrieval, the evidence check ----------------------------------
def _retrieve(
    *,
    query: str,
    top_k: int,
    document_ids: list[int] | None,
    query_vector: np.ndarray,
    prefer_document_ids: Sequence[int] = (),
) -> SearchResult | None:
    """The ranked chunks for the query; None when the knowledge base is empty. The stored
    vectors of their sentences are read too (into the sentence vector cache), so that the
    evidence check and the answer that follow embed nothing but the question. Whether the
    knowledge base is empty is asked only when the search found nothing (a query fewer for
    every other question)."""
    result = chunks_search(
        query=query,
        top_k=top_k,
        document_ids=document_ids,
        query_vector=query_vector,
        prefer_document_ids=prefer_document_ids,
    )
    if not result.chunks:
        return None if knowledge_base_is_empty() else result
    sentence_vectors_preload(result.chunks)
    return result


async def _embed(query: str) -> tuple[np.ndarray, bool]:
    return await sync_to_async(embedding.embed_query, thread_sensitive=False)(query)


async def _search_once(
    exchange: _Exchange,
    *,
    question: str,
    query: str,
    query_vector: np.ndarray,
    contextual: bool,
    plan: SearchPlan,
    document_ids: list[int] | None,
    stored: _Stored,
) -> _Found:
    """Retrieve for `query` (`question`, or the question read in context) and check the
    evidence."""
    threshold = stored.threshold
    result = await database_sync_to_async(_retrieve)(
        query=query,
        top_k=stored.top_k,
        document_ids=document_ids,
        query_vector=query_vector,
        prefer_document_ids=plan.prefer_documents if contextual else (),
    )
    if result is None:
        return _Found(query, contextual, query_vector, [], EMPTY_KB_REFUSAL)
    exchange.best_similarity = result.best_similarity
    decision = await evidence_assess_async(
        question=query,
        question_vector=result.query_vector,
        chunks=result.chunks,
        threshold=threshold,
        threshold_on=THRESHOLD_ON,
    )
    exchange.evidence = decision.reason
    qualifying, refusal = evidence_outcome(result.chunks, decision, threshold)
    if contextual and refusal is None and await database_sync_to_async(unknown_own_terms)(question):
        exchange.evidence = "unknown-terms"  # the follow-up's own words: see followups.py
        qualifying, refusal = [], NO_EVIDENCE_REFUSAL
    return _Found(query, contextual, result.query_vector, qualifying, refusal)


def _narrowed(document_ids: list[int] | None, within: Sequence[int]) -> list[int] | None:
    """The request's document filter narrowed to `within` (when given)."""
    if not within:
        return document_ids
    return sorted(set(within) & set(document_ids) if document_ids is not None else set(within))


async def _search(
    exchange: _Exchange,
    *,
    request: _Request,
    stored: _Stored,
    question: str,
    embedded: asyncio.Future | None,
) -> _Found:
    """Search for the question read with its conversation (chat/answering/followups.py): the
    planned query first and, when the evidence check refuses it, the plan's fallback once
    more before refusing."""
    started = time.perf_counter()
    plan = SearchPlan(query=question)
    if stored.history:
        plan = await database_sync_to_async(search_plan_in_context)(question, stored.history)
    if stored.mode == Message.Mode.GENERATIVE:
        plan = await search_plan_generative(plan, question=question, history=stored.history)
    if plan.contextual:
        if embedded is not None and plan.fallback != question:
            embedded.cancel()
            embedded = None
        vector, truncated = await _embed(plan.query)
    elif request.supplied_vector is not None:
        vector, truncated = request.supplied_vector, False
    elif embedded is not None:
        vector, truncated = await embedded
    else:
        vector, truncated = await _embed(question)
    if truncated:
        exchange.warning = TRUNCATION_WARNING.format(limit=embedding.MAX_TOKENS)
    found = await _search_once(
        exchange,
        question=question,
        query=plan.query,
        query_vector=vector,
        contextual=plan.contextual,
        plan=plan,
        document_ids=request.document_ids,
        stored=stored,
    )
    if found.refusal is not None and found.refusal is not EMPTY_KB_REFUSAL and plan.fallback:
        if plan.contextual and embedded is not None:  # the question as written: embedded early
            fallback_vector, _ = await embedded
        else:
            fallback_vector, _ = await _embed(plan.fallback)
        retried = await _search_once(
            exchange,
            question=question,
            query=plan.fallback,
            query_vector=fallback_vector,
            contextual=plan.fallback != question,
            plan=plan,
            document_ids=_narrowed(request.document_ids, plan.fallback_within),
            stored=stored,
        )
        if retried.refusal is None:
            found = retried
    exchange.retrieval_ms = round((time.perf_counter() - started) * 1000, 1)
    exchange.search_query, exchange.contextual = found.query, found.contextual
    return found


# --- The pipeline --------------------------------------------------------------------------------
async def answer_stream(
    *,
    user: AbstractBaseUser,
    question: str | None,
    message_id: uuid.UUID | str,
    conversation_id: uuid.UUID | str | None = None,
    is_private: bool = False,
    options: AnswerOptions | None = None,
) -> AsyncIterator[Event]:
    """Answer `question` for `user` as a stream of events (see the module docstring).

    `message_id` is the client's id of the question (idempotency key); `conversation_id` an
    existing conversation of the user, or the id to give a new one (omitted: a new one is
    created); `is_private` applies only when the conversation is created. With
    `options.regenerate` the stored question `message_id` is answered again and `question` is
    ignored.
    """
    exchange = _Exchange()
    # 1. Validate.
    request = _request_validate(
        user=user,
        question=question,
        message_id=message_id,
        conversation_id=conversation_id,
        is_private=is_private,
        options=options or AnswerOptions(),
    )
    # 2. Store the exchange; the question is embedded meanwhile (CPU, a worker thread) unless
    # it leans on an existing conversation: then it is searched read in context, and embedded
    # as written only should that search fail (followups.py).
    embedded = None
    if (
        request.supplied_vector is None
        and not request.regenerate
        and not (request.conversation_id is not None and leans_on_conversation(request.question))
    ):
        embedded = asyncio.ensure_future(_embed(request.question))
    stored = await _exchange_store_or_release(request, embedded)
    if isinstance(stored.begun, services.ExchangeExisting):
        if embedded is not None:
            embedded.cancel()
        answer = await _stored_answer_wait(stored.begun)
        for event in stored_answer_events(answer):
            yield exchange.event(event.type, event.data)
        _log_replay(exchange, answer, user=user)
        return

    conversation, question_message, answer_message = (
        stored.begun.conversation,
        stored.begun.question,
        stored.begun.answer,
    )
    question = question_message.content
    ids = {
        "conversation_id": str(conversation.pk),
        "message_id": str(answer_message.pk),
        "reply_to": str(question_message.pk),
    }
    top_k = stored.top_k
    status = Message.Status.STREAMING
    try:
        # 3-5. Build the search query from the conversation, retrieve, check the evidence.
        found = await _search(
            exchange, request=request, stored=stored, question=question, embedded=embedded
        )
        if exchange.warning:
            yield exchange.event("warning", {"message": exchange.warning})
        if found.refusal is not None:
            status = Message.Status.REFUSED
            exchange.first_event_ms = exchange.first_event_ms or exchange.elapsed_ms()
            await database_sync_to_async(services.answer_finish)(
                answer_id=answer_message.pk,
                status=status,
                content=found.refusal.message,
                suggestions=found.refusal.suggestions,
                warning=exchange.warning,
                search_query=found.query,
                figures=exchange.figures(top_k),
            )
            yield exchange.event(
                "refusal",
                _refusal_data(ids, found.refusal.message, found.refusal.suggestions, found.query),
            )
            return

        # 6. Answer: the answerer of the mode writes the text, streamed as it comes.
        exchange.answerer = answerer_for(stored.mode)
        request_for_answerer = AnswerRequest(
            question=question,
            search_query=found.query,
            query_vector=found.query_vector,
            chunks=found.qualifying,
            history=stored.history,
            question_id=question_message.pk,
            max_history_turns=stored.max_history_turns,
        )
        if stored.notice:
            exchange.warn(stored.notice)
            yield exchange.event("warning", {"message": stored.notice})
        await exchange.answerer.prepare(request_for_answerer)
        yield exchange.event(
            "answer_start",
            {
                **ids,
                "title": conversation.title,
                "is_private": conversation.is_private,
                "search_query": found.query,
            },
        )
        delay = settings.CHAT_STREAM_DELAY_MS / 1000
        async with aclosing(exchange.answerer.stream(request_for_answerer)) as pieces:
            async for piece in pieces:
                yield exchange.event("answer_delta", {"text": piece})
                if delay:
                    await asyncio.sleep(delay)

        # 7. Store and finish.
        written = exchange.written(complete=True)
        if written.notice:
            exchange.warn(written.notice)
            yield exchange.event("warning", {"message": written.notice})
        citations = await database_sync_to_async(services.answer_finish)(
            answer_id=answer_message.pk,
            status=Message.Status.COMPLETE,
            content=written.content,
            cited=written.cited,
            warning=exchange.warning,
            search_query=found.query,
            figures=exchange.figures(top_k),
        )
        if citations is None:
            raise RuntimeError(f"answer {answer_message.pk} was finished by someone else")
        status = Message.Status.COMPLETE
        yield exchange.event(
            "sources",
            {
                "message_id": ids["message_id"],
                "citations": [citation_as_dict(c, stale=False) for c in citations],
            },
        )
        yield exchange.event("answer_end", {"message_id": ids["message_id"], "status": str(status)})
    except (asyncio.CancelledError, GeneratorExit):
        if status == Message.Status.STREAMING:
            status = Message.Status.INTERRUPTED
            await asyncio.shield(_partial_store(exchange, answer_message.pk, status, top_k))
        raise
    except AnswerFailed as failure:
        status = Message.Status.ERROR
        await _partial_store(exchange, answer_message.pk, status, top_k, error_code=failure.code)
        yield exchange.event("error", {"code": failure.code, "message": failure.message})
    except Exception as exc:
        errors_logger.exception("answering message %s failed", question_message.pk)
        status = Message.Status.ERROR
        code, message = "internal", INTERNAL_ERROR_MESSAGE
        if isinstance(exc, (OperationalError, InterfaceError)):  # the database went away
            code, message = "upstream-unavailable", UNAVAILABLE_MESSAGE
        try:
            await _partial_store(exchange, answer_message.pk, status, top_k, error_code=code)
        except (OperationalError, InterfaceError):
            errors_logger.warning(
                "answer %s left streaming: database unavailable", ids["message_id"]
            )
        yield exchange.event("error", {"code": code, "message": message})
    finally:
        if exchange.answerer is not None:
            await exchange.answerer.aclose()  # a reply prepared but never streamed
        _log(
            exchange,
            conversation=ids["conversation_id"],
            message=ids["message_id"],
            user=user.pk,
            top_k=top_k,
            status=status,
            mode=stored.mode,
            citations=len(exchange.written(complete=status == Message.Status.COMPLETE).cited),
            replayed=False,
        )


async def _partial_store(
    exchange: _Exchange,
    answer_id: uuid.UUID,
    status: str,
    top_k: int,
    *,
    error_code: str = "",
) -> None:
    """Store what was streamed so far (an interrupted or failed answer), its citations limited
    to the markers already sent."""
    partial = exchange.written(complete=False)
    await database_sync_to_async(services.answer_finish)(
        answer_id=answer_id,
        status=status,
        content=partial.content,
        cited=partial.cited,
        warning=exchange.warning,
        search_query=exchange.search_query,
        error_code=error_code,
        figures=exchange.figures(top_k),
    )


async def _exchange_store_or_release(request: _Request, embedded: asyncio.Future | None) -> _Stored:
    """Step 2, shielded: cancelled meanwhile, the store still completes and an answer it
    claimed is released (`_release_unstarted`)."""
    prepare = asyncio.ensure_future(database_sync_to_async(_exchange_store)(request))
    try:
        return await asyncio.shield(prepare)
    except BaseException as exc:
        if embedded is not None:
            embedded.cancel()
        if isinstance(exc, asyncio.CancelledError):
            await _release_unstarted(prepare)
        raise


async def _release_unstarted(prepare: asyncio.Future) -> None:
    """Cancelled while the exchange was being stored: once the store is done, an answer it
    claimed is marked interrupted (empty) instead of being left `streaming`."""
    try:
        begun = (await prepare).begun
    except BaseException:
        return
    if isinstance(begun, services.ExchangeClaim):
        await database_sync_to_async(services.answer_finish)(
            answer_id=begun.answer.pk, status=Message.Status.INTERRUPTED, content=""
        )


def _refusal_data(
    ids: dict[str, str], message: str, suggestions: list[str], search_query: str
) -> dict[str, Any]:
    return {
        **ids,
        "message": message,
        "suggestions": list(suggestions),
        "search_query": search_query,
    }


async def _stored_answer_wait(existing: services.ExchangeExisting) -> Message:
    """The stored answer, once it is no longer streaming (409 if it stays so too long)."""
    answer = existing.answer
    deadline = time.monotonic() + settings.CHAT_ANSWER_WAIT_SECONDS
    while answer.status == Message.Status.STREAMING:
        answer = await database_sync_to_async(services.answer_release_if_stale)(answer)
        if answer.status != Message.Status.STREAMING:
            break
        if time.monotonic() >= deadline:
            raise AnswerError.conflict(
                "This message is still being answered. Try again in a moment.",
                details={"message_id": str(existing.question.pk)},
            )
        await asyncio.sleep(POLL_SECONDS)
        refreshed = await database_sync_to_async(services.answer_refresh)(answer.pk)
        if refreshed is None:
            raise AnswerError.conflict("This message's answer was replaced. Send it again.")
        answer = refreshed
    stored = await database_sync_to_async(selectors.message_answer_with_citations)(answer.pk)
    if stored is None:
        raise AnswerError.conflict("This message's answer was replaced. Send it again.")
    return stored


def stored_answer_events(answer: Message) -> list[Event]:
    """The events of a stored assistant message, as its first request streamed them (the
    content as a single delta). Expects conversation and citations (with chunk__document)
    to be loaded, e.g. by `selectors.message_answer_with_citations`."""
    conversation = answer.conversation
    ids = {
        "conversation_id": str(conversation.pk),
        "message_id": str(answer.pk),
        "reply_to": str(answer.reply_to_id),
    }
    events: list[Event] = []
    if answer.warning:
        events.append(Event("warning", {"message": answer.warning}))
    if answer.status == Message.Status.REFUSED:
        events.append(
            Event(
                "refusal",
                _refusal_data(ids, answer.content, answer.suggestions, answer.search_query),
            )
        )
        return events
    if answer.status == Message.Status.ERROR:
        events.append(
            Event(
                "error",
                {"code": answer.error_code or "internal", "message": INTERNAL_ERROR_MESSAGE},
            )
        )
        return events
    events.append(
        Event(
            "answer_start",
            {
                **ids,
                "title": conversation.title,
                "is_private": conversation.is_private,
                "search_query": answer.search_query,
            },
        )
    )
    if answer.content:
        events.append(Event("answer_delta", {"text": answer.content}))
    citations = [citation_as_dict(c) for c in answer.citations.all()]
    events.append(Event("sources", {"message_id": ids["message_id"], "citations": citations}))
    events.append(
        Event("answer_end", {"message_id": ids["message_id"], "status": str(answer.status)})
    )
    return events


def _log_replay(exchange: _Exchange, answer: Message, *, user: AbstractBaseUser) -> None:
    _log(
        exchange,
        conversation=str(answer.conversation_id),
        message=str(answer.pk),
        user=user.pk,
        top_k=answer.top_k,
        status=answer.status,
        citations=len(answer.citations.all()),
        replayed=True,
        best_similarity=answer.best_similarity,
    )


def _log(exchange: _Exchange, **fields: Any) -> None:
    """One structured line per exchange on the `sourced.exchange` logger."""
    record = {
        "event": "chat.exchange",
        "retrieval_ms": exchange.retrieval_ms,
        "best_similarity": (
            None if exchange.best_similarity is None else round(exchange.best_similarity, 4)
        ),
        "evidence": exchange.evidence,
        "search_query": exchange.search_query,
        "contextual": exchange.contextual,
        "first_event_ms": exchange.first_event_ms,
        "total_ms": exchange.elapsed_ms(),
        **fields,
    }
    record["refused"] = record.get("status") == Message.Status.REFUSED
    if isinstance(record.get("best_similarity"), float):
        record["best_similarity"] = round(record["best_similarity"], 4)
    logger.info(json.dumps(record, default=str, sort_keys=True))
