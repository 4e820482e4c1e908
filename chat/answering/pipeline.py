"""The one answering pipeline: a question in, a sequence of events out. Transports only render.

    async for event in answer_stream(user=..., question=..., message_id=..., options=...):
        ...  # event.type, event.data

The steps, in `answer_stream`'s order, each in a module of its own: 1. validate the request
(chat/answering/request.py); 2. store the exchange (the question and its answer, status
streaming) and read the conversation's previous turns (chat/answering/exchange.py); 3. plan the
search from the conversation (a follow-up is read in context: chat/answering/followups.py);
4. retrieve; 5. check the evidence (refuse, or try the plan's fallback once first; steps 3-5:
chat/answering/search.py); 6. answer: the answerer of the mode writes the text
(chat/answering/answerers.py, `answerer_for`); 7. store and finish (chat/answering/exchange.py
for an unfinished answer). A repeated message_id is replayed (chat/answering/replay.py). This
module runs the steps and turns their outcome into events.

Before the first event, bad input or access raises `AnswerError` (code, message, status,
details): validation-failed 422 (empty or too long message, top_k outside 1..20, embedding not
384 finite numbers), bad-request 400 (malformed UUID), forbidden 403
(someone else's conversation), not-found 404 (regenerating an unknown question, unknown
document ids), conflict 409
(the message_id was used for something else, or its answer is still streaming after
settings.CHAT_ANSWER_WAIT_SECONDS). Nothing is stored in those cases.

Then the events, in order (`docs/product.md §6`; `data` shown):

- `warning {message}` — optional, first: the question was longer than the embedding model
  reads, only its beginning was embedded (also stored as `Message.warning`); or, right before
  `answer_start`, why the admin's generative mode is not used for this answer (no model
  configured, circuit open: chat/answering/generative.py); or, after the last delta, that the
  model's answer cites no source ("Not grounded in the documents"). All stored, joined.
- either `refusal {conversation_id, message_id, reply_to, message, suggestions,
  search_query}` — alone and last: the knowledge base is empty, or the evidence check finds no
  close enough passage (below the admin's threshold, or short of the further margins of
  chat/answering/evidence_signals.py; the texts of `docs/product.md §4`); stored as an
  assistant message with status `refused`;
- or `answer_start {conversation_id, message_id, reply_to, title, is_private, search_query}` →
  `answer_delta {text}` (one or more; joined they are the answer's content, each sentence
  followed by its marker " [n]") → `sources {message_id, evidence, citations: [{n, chunk_id,
  document_id, title, page, section, url, excerpt, text, similarity, stale}],
  searched_document}` → `answer_end {message_id, status}`. `evidence` is "weak" when the
  evidence check answered from weak support (the page shows a notice, `docs/product.md §4`),
  else "strong"; also `Message.evidence`. `searched_document` `{id, title}`: the question
  named a document the asker may read and the answer was found in it alone
  (chat/answering/named_documents.py; also stored on the message); null otherwise.
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
sent, and re-raises. One JSON log line per exchange goes to the `sourced.exchange` logger
(chat/answering/trace.py).

A process works on at most settings.CHAT_ANSWER_SLOTS answers at once until their first
event, the others waiting their turn in the order they asked (chat/answering/turns_gate.py).

The embedding model runs on the embedding batcher's thread in a server process, in a worker
thread otherwise (never on the event loop); database work runs via `database_sync_to_async`,
each step one transaction inside `chat.services` (the search is planned on the store's hop).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import InterfaceError, OperationalError

from chat import services
from chat.answering.answerers import Answerer, AnswerFailed, AnswerRequest, ExtractiveAnswerer
from chat.answering.events import INTERNAL_ERROR_MESSAGE, Event, refusal_data, sources_data
from chat.answering.evidence_signals import WEAK_REASONS
from chat.answering.exchange import (
    documents_given,
    exchange_store_or_release,
    heartbeat_keep,
    partial_store,
)
from chat.answering.generative import GenerativeAnswerer
from chat.answering.replay import replay_log, stored_answer_events, stored_answer_wait
from chat.answering.request import AnswerOptions, request_validate
from chat.answering.request import embedding_validate as _embedding_validate  # noqa: F401 (tests)
from chat.answering.search import (
    query_embed,
    question_search,
    search_planned,
)
from chat.answering.stage_cpu import cpu_stage, stage_cpu_begin
from chat.answering.trace import ExchangeTrace, exchange_log
from chat.answering.turns_gate import Turn, answer_turn
from chat.citations import citation_as_dict
from chat.models import Message
from chat.transcript import finished_answer_row
from knowledge.access import Reader

errors_logger = logging.getLogger(__name__)

UNAVAILABLE_MESSAGE = (
    "The knowledge base is unavailable for a moment. What was answered so far is kept; "
    "please try again shortly."
)


@cpu_stage("finish")
def _answer_finish(**fields):  # noqa: ANN003, ANN202 (services.answer_finish's)
    return services.answer_finish(**fields)


def _given_record_then_prepare(
    answerer: Answerer, request: AnswerRequest, answer_id: uuid.UUID, given: tuple[int, ...]
) -> bool:
    """Record the documents `given` to the answer, then prepare `answerer` here when it can
    (`Answerer.prepare_here`): whether it did."""
    services.answer_given_record(answer_id=answer_id, document_ids=given)
    return answerer.prepare_here(request)


def answerer_for(mode: str) -> Answerer:
    """A new answerer for `mode` (a `Message.Mode`)."""
    if mode == Message.Mode.EXTRACTIVE:
        return ExtractiveAnswerer()
    if mode == Message.Mode.GENERATIVE:
        return GenerativeAnswerer()
    raise ValueError(f"no answerer for mode {mode!r}")


async def answer_stream(
    *,
    user: AbstractBaseUser,
    question: str | None,
    message_id: uuid.UUID | str,
    conversation_id: uuid.UUID | str | None = None,
    is_private: bool = False,
    options: AnswerOptions | None = None,
    reader: Reader | None = None,
    conversation_empty: bool = False,
) -> AsyncIterator[Event]:
    """Answer `question` for `user` as a stream of events: `_answer_stream`, once it is this
    answer's turn (chat/answering/turns_gate.py), which ends at its first event other than a
    warning at the latest."""
    turn = await answer_turn()
    try:
        stream = _answer_stream(
            user=user,
            question=question,
            message_id=message_id,
            conversation_id=conversation_id,
            is_private=is_private,
            options=options,
            reader=reader,
            conversation_empty=conversation_empty,
            turn=turn,
        )
        async with aclosing(stream):
            async for event in stream:
                if event.type != "warning":  # a warning comes before the answer's work is done
                    turn.end()
                yield event
    finally:
        turn.end()


async def _answer_stream(
    *,
    user: AbstractBaseUser,
    question: str | None,
    message_id: uuid.UUID | str,
    conversation_id: uuid.UUID | str | None,
    is_private: bool,
    options: AnswerOptions | None,
    reader: Reader | None,
    conversation_empty: bool,
    turn: Turn,
) -> AsyncIterator[Event]:
    """Answer `question` for `user` as a stream of events (see the module docstring).

    `message_id` is the client's id of the question (idempotency key); `conversation_id` an
    existing conversation of the user, or the id to give a new one (omitted: a new one is
    created); `is_private` applies only when the conversation is created. With
    `options.regenerate` the stored question `message_id` is answered again and `question` is
    ignored. `reader`: `user`'s `Reader` when the caller computed it for this request (a
    WebSocket computes one per message, never per connection); otherwise it is computed once
    when the exchange is stored. `conversation_empty`: the caller knows `conversation_id`
    holds no earlier question (a socket opened on a conversation its first question creates);
    a hint for speed only (see step 2), never a different answer. `turn`: this answer's turn,
    ended here before waiting on another request's answer or on a language model.
    """
    exchange = ExchangeTrace(cpu_ms=stage_cpu_begin())
    # 1. Validate.
    request = request_validate(
        user=user,
        question=question,
        message_id=message_id,
        conversation_id=conversation_id,
        is_private=is_private,
        options=options or AnswerOptions(),
        reader=reader,
    )
    # 2. Store the exchange. A question that opens a conversation is embedded meanwhile (CPU,
    # a worker thread). One asked in a conversation with earlier turns is embedded once its
    # search is planned: as written or read in context (followups.py), whichever the plan
    # searches first; its fallback is embedded only should that search fail
    # (docs/decisions/0150-answer-cost-per-question.md).
    embedded = None
    if (
        request.supplied_vector is None
        and not request.regenerate
        and (request.conversation_id is None or conversation_empty)
    ):
        embedded = asyncio.ensure_future(query_embed(request.question))
    stored = await exchange_store_or_release(
        request, embedded, then=functools.partial(search_planned, within=request.document_ids)
    )
    if isinstance(stored.begun, services.ExchangeExisting):
        turn.end()
        if embedded is not None:
            embedded.cancel()
        answer = await stored_answer_wait(stored.begun)
        for event in await database_sync_to_async(stored_answer_events)(answer, user=stored.reader):
            yield exchange.event(event.type, event.data)
        replay_log(exchange, answer, user=user)
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
    heartbeat = asyncio.ensure_future(heartbeat_keep(answer_message.pk))
    try:
        # 3-5. Build the search query from the conversation, retrieve, check the evidence.
        found = await question_search(
            exchange, request=request, stored=stored, question=question, embedded=embedded
        )
        # What reaches the answer: the qualifying passages, and the earlier turns when they
        # shaped the search query or go to the model
        # (docs/decisions/0130-an-answer-records-what-it-was-given.md).
        exchange.given = documents_given(
            chunks=found.qualifying,
            history=stored.history,
            with_history=found.contextual or stored.mode == Message.Mode.GENERATIVE,
        )
        if exchange.warning:
            yield exchange.event("warning", {"message": exchange.warning})
        if found.refusal is not None:
            status = Message.Status.REFUSED
            exchange.first_event_ms = exchange.first_event_ms or exchange.elapsed_ms()
            await database_sync_to_async(_answer_finish)(
                answer_id=answer_message.pk,
                status=status,
                content=found.refusal.message,
                suggestions=found.refusal.suggestions,
                warning=exchange.warning,
                search_query=found.query,
                figures=exchange.figures(top_k),
                given=exchange.given,
            )
            yield exchange.event(
                "refusal",
                refusal_data(ids, found.refusal.message, found.refusal.suggestions, found.query),
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
        # Recorded before the first word leaves: a stopped or failed answer has its record. An
        # answerer that prepares on a thread (the extractive one) does so on the record's hop.
        prepared = await database_sync_to_async(_given_record_then_prepare)(
            exchange.answerer, request_for_answerer, answer_message.pk, exchange.given
        )
        if not prepared:
            turn.end()  # the generative answerer waits on its model
            await exchange.answerer.prepare(request_for_answerer)
            given = tuple(sorted({*exchange.given, *exchange.answerer.documents_given}))
            if given != exchange.given:
                exchange.given = given
                await database_sync_to_async(services.answer_given_record)(
                    answer_id=answer_message.pk, document_ids=given
                )
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
        evidence = Message.Evidence.STRONG
        if found.evidence in WEAK_REASONS:
            evidence = Message.Evidence.WEAK
        if written.notice:
            exchange.warn(written.notice)
            yield exchange.event("warning", {"message": written.notice})
        citations = await database_sync_to_async(_answer_finish)(
            answer_id=answer_message.pk,
            status=Message.Status.COMPLETE,
            content=written.content,
            cited=written.cited,
            warning=exchange.warning,
            search_query=found.query,
            figures=exchange.figures(top_k),
            searched_document=(
                (found.searched_document.id, found.searched_document.title)
                if found.searched_document
                else None
            ),
            searched_documents=[d.as_dict() for d in found.searched_documents],
            evidence=evidence,
            answer=answer_message,
        )
        if citations is None:
            raise RuntimeError(f"answer {answer_message.pk} was finished by someone else")
        status = Message.Status.COMPLETE
        yield exchange.event(
            "sources",
            sources_data(
                ids["message_id"],
                [citation_as_dict(c, stale=False) for c in citations],
                str(evidence),
                found.searched_document.as_dict() if found.searched_document else None,
                [d.as_dict() for d in found.searched_documents],
            ),
        )
        yield exchange.event(
            "answer_end",
            {"message_id": ids["message_id"], "status": str(status)},
            row=finished_answer_row(answer_message, citations),
        )
    except (asyncio.CancelledError, GeneratorExit):
        if status == Message.Status.STREAMING:
            status = Message.Status.INTERRUPTED
            await asyncio.shield(partial_store(exchange, answer_message.pk, status, top_k))
        raise
    except AnswerFailed as failure:
        status = Message.Status.ERROR
        await partial_store(exchange, answer_message.pk, status, top_k, error_code=failure.code)
        yield exchange.event("error", {"code": failure.code, "message": failure.message})
    except Exception as exc:
        errors_logger.exception("answering message %s failed", question_message.pk)
        status = Message.Status.ERROR
        code, message = "internal", INTERNAL_ERROR_MESSAGE
        if isinstance(exc, (OperationalError, InterfaceError)):  # the database went away
            code, message = "upstream-unavailable", UNAVAILABLE_MESSAGE
        try:
            await partial_store(exchange, answer_message.pk, status, top_k, error_code=code)
        except (OperationalError, InterfaceError):
            errors_logger.warning(
                "answer %s left streaming: database unavailable", ids["message_id"]
            )
        yield exchange.event("error", {"code": code, "message": message})
    finally:
        heartbeat.cancel()
        if exchange.answerer is not None:
            await exchange.answerer.aclose()  # a reply prepared but never streamed
        exchange_log(
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
