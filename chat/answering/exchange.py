"""Storing the exchange (steps 2 and 7 of chat/answering/pipeline.py): the question and its
answer claimed in one database round trip, and an unfinished answer stored as it stands.

`exchange_store` is synchronous (a few queries; every write a `chat.services` function, one
transaction each): async callers use `exchange_store_or_release`. `partial_store` runs
`services.answer_finish` through `database_sync_to_async`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from channels.db import database_sync_to_async
from django.db import DatabaseError

from chat import services
from chat.answering.evidence import chat_settings_get, evidence_threshold
from chat.answering.followups import Turn
from chat.answering.generative import answering_mode
from chat.answering.request import ValidatedRequest
from chat.answering.stage_cpu import cpu_stage
from chat.answering.trace import ExchangeTrace
from chat.attachments import attachments_add, reader_in_conversation, unknown_file_ids
from chat.documents import unknown_document_ids
from chat.errors import AnswerError
from chat.models import Message
from chat.turns import conversation_turns_before
from knowledge.access import Reader, reader_for
from knowledge.retrieval import RetrievedChunk

logger = logging.getLogger(__name__)

# Previous turns read for a follow-up question (enough to find where its topic began).
FOLLOWUP_TURNS = 10


@dataclass(frozen=True)
class StoredExchange:
    """The exchange as stored (step 2): the settings it runs with, the claim on its answer (or
    the earlier exchange of the same message id) and the conversation's previous turns."""

    top_k: int
    threshold: float
    mode: str
    begun: services.ExchangeClaim | services.ExchangeExisting
    history: list[Turn]
    reader: Reader  # what the asker may read, computed once for the exchange
    notice: str = ""  # why the answer is not in the admin's mode (chat/answering/generative.py)
    max_history_turns: int = 6
    then: object = None  # what `exchange_store_then` ran after the store gave (or raised)


@cpu_stage("store")
def exchange_store(request: ValidatedRequest) -> StoredExchange:
    """Compute the asker's `Reader` (once for the exchange, unless the request carries it: the
    search, the evidence check and the withheld check of the earlier turns use it), check the
    document filter, read the settings, store (or find) the exchange and read the
    conversation's previous turns (the larger of FOLLOWUP_TURNS and the admin's history
    turns).

    The asker's `file_ids` are attached to the conversation, and the `Reader` then searches the
    asker's files attached to it (chat/attachments.py).

    Raises `AnswerError`: not-found for unknown document ids (a document the asker may not
    read is unknown to them, with the same message;
    docs/decisions/0105-schema-valid-requests-accepted.md) or file ids (not the asker's), and what
    `services.exchange_begin` / `services.exchange_regenerate` raise (someone else's
    conversation, an unknown question to regenerate, a message_id used for something else).
    """
    asker = request.reader if request.reader is not None else reader_for(request.user)
    reader = asker
    if request.document_ids:
        unknown = unknown_document_ids(request.document_ids, reader=reader)
        if unknown:
            message = f"Unknown document ids: {', '.join(map(str, unknown))}."
            raise AnswerError("not-found", message, details={"document_ids": [message]})
    if request.file_ids:
        unknown = unknown_file_ids(request.file_ids, owner=request.user)
        if unknown:
            message = f"Unknown file ids: {', '.join(map(str, unknown))}."
            raise AnswerError("not-found", message, details={"file_ids": [message]})
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
    if request.file_ids:
        attachments_add(conversation=begun.conversation, file_ids=request.file_ids)
    reader = reader_in_conversation(reader, conversation_id=begun.conversation.pk)
    history = []
    if isinstance(begun, services.ExchangeClaim) and not begun.new:
        history = conversation_turns_before(
            begun.question,
            limit=max(chat_settings.max_history_turns, FOLLOWUP_TURNS),
            asker=asker,
        )
    return StoredExchange(
        top_k=top_k,
        threshold=evidence_threshold(chat_settings),
        mode=mode,
        begun=begun,
        history=history,
        reader=reader,
        notice=choice.notice,
        max_history_turns=chat_settings.max_history_turns,
    )


def documents_given(
    *, chunks: Sequence[RetrievedChunk], history: Sequence[Turn], with_history: bool
) -> tuple[int, ...]:
    """The documents whose text reaches an answer given `chunks` (the qualifying passages) and,
    `with_history` (a generative answer's prompt, or a search query read in context), the
    earlier turns: what each of their answers drew on (`Turn.given_document_ids`; a turn its
    asker may not read now was given as unanswered and brings nothing)
    (docs/decisions/0130-an-answer-records-what-it-was-given.md)."""
    drawn = {chunk.document_id for chunk in chunks}
    if with_history:
        drawn.update(d for turn in history for d in turn.given_document_ids)
    return tuple(sorted(drawn))


def exchange_store_then(
    request: ValidatedRequest, then: Callable[[StoredExchange], object]
) -> StoredExchange:
    """`exchange_store(request)`, and `then(stored)` right after it on the same thread when
    the exchange is a new claim (not one stored earlier under the message id), kept in
    `stored.then`: its result, or the exception it raised (for the caller to raise where its
    failure is handled)."""
    stored = exchange_store(request)
    if not isinstance(stored.begun, services.ExchangeClaim):
        return stored
    try:
        outcome = then(stored)
    except Exception as exc:
        outcome = exc
    return replace(stored, then=outcome)


async def exchange_store_or_release(
    request: ValidatedRequest,
    embedded: asyncio.Future | None,
    then: Callable[[StoredExchange], object],
) -> StoredExchange:
    """Step 2, shielded: cancelled meanwhile, the store still completes and an answer it
    claimed is released (`_release_unstarted`). `then`: see `exchange_store_then` (one thread
    hop for both)."""
    prepare = asyncio.ensure_future(database_sync_to_async(exchange_store_then)(request, then))
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


async def heartbeat_keep(answer_id: uuid.UUID) -> None:
    """Renew the answer's heartbeat every services.HEARTBEAT_SECONDS until cancelled (the
    caller cancels it when the answer ends) or the answer is no longer streaming; a database
    that cannot be reached is tried again at the next beat. While it runs, nobody takes the
    answer for one left by a process that died (`services.answer_release_if_stale`)."""
    while True:
        await asyncio.sleep(services.HEARTBEAT_SECONDS)
        try:
            if not await database_sync_to_async(services.answer_heartbeat)(answer_id):
                return
        except DatabaseError:
            logger.warning("Renewing the heartbeat of answer %s failed", answer_id)


async def partial_store(
    exchange: ExchangeTrace,
    answer_id: uuid.UUID,
    status: str,
    top_k: int,
    *,
    error_code: str = "",
) -> None:
    """Store what was streamed so far (an interrupted or failed answer), its citations limited
    to the markers already sent, and the documents given to it (`exchange.given`)."""
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
        given=exchange.given,
    )
