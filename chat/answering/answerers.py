"""How an answer's text is written, behind one small interface (`docs/product.md §5`).

The pipeline (chat/answering/pipeline.py) has already searched, checked the evidence and decided
to answer; an `Answerer` then turns the qualifying chunks into text:

    answerer = answerer_for(mode)                   # chat/answering/pipeline.py
    async for piece in answerer.stream(request):   # the answer_delta texts, as produced
        ...
    written = answerer.written(complete=True)      # the stored text and its citations

`written(complete=False)` is what to keep when the stream stopped early (Stop, a disconnect, a
failure): the text already streamed and only the citations whose marker was sent. An answerer
is used for one answer only. Before `answer_start` the pipeline has the answerer prepare: the
work that may fail before anything is shown. The extractive answerer writes its answer then, on
the thread hop that records what it was given (`prepare_here`). The generative answerer opens
the model's reply, awaited (`prepare`). Failing, either raises `AnswerFailed`, and so does a
stream that breaks off.

Two implementations: extractive (no model, here) and generative (chat/answering/generative.py,
a language model behind chat/answering/llm/). The pipeline picks one per answer
(`answerer_for`); this module imports neither the pipeline nor the generative answerer.
"""

from __future__ import annotations

import abc
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from asgiref.sync import sync_to_async
from django.conf import settings

from chat.answering import followups
from chat.answering.extractive import ExtractiveAnswer, extractive_answer
from chat.answering.followups import Turn, said_before
from chat.answering.stage_cpu import cpu_stage
from chat.answering.terms import terms
from chat.models import Message
from knowledge.retrieval import RetrievedChunk


@dataclass(frozen=True)
class AnswerRequest:
    """What an answerer gets: the question as typed, what it was searched as (its vector), the
    qualifying chunks (best first) and the conversation's previous turns (oldest first)."""

    question: str
    search_query: str
    query_vector: np.ndarray
    chunks: Sequence[RetrievedChunk]
    history: Sequence[Turn] = field(default=())
    question_id: uuid.UUID | None = None  # the stored question (memory of the conversation)
    max_history_turns: int = 6


@dataclass(frozen=True)
class WrittenAnswer:
    """The answer's text as stored and its citations: (number, chunk), numbered by first use;
    `notice`: something the reader should know about it (shown and stored as a warning)."""

    content: str
    cited: list[tuple[int, RetrievedChunk]]
    notice: str = ""


class AnswerFailed(Exception):
    """The answer could not be written: before anything was shown (`prepare`), or part-way."""

    code = "upstream-unavailable"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Answerer(abc.ABC):
    """Writes one answer from the qualifying chunks."""

    mode: str
    # Documents whose text `prepare` put before the answerer beyond the request's chunks and
    # history (a generative answer's conversation summary): part of the answer's record.
    documents_given: tuple[int, ...] = ()

    async def prepare(self, request: AnswerRequest) -> None:  # noqa: B027 (optional step)
        """What must succeed before the answer starts (AnswerFailed otherwise)."""

    def prepare_here(self, request: AnswerRequest) -> bool:
        """`prepare` on the calling thread (a worker thread, never an event loop), for an
        answerer whose preparing is CPU work alone and gives it nothing beyond the request
        (`documents_given` stays empty): True when done, so the pipeline records what the
        answer was given on the same thread hop; False when this answerer cannot (then
        `prepare` is awaited)."""
        return False

    async def aclose(self) -> None:  # noqa: B027 (optional step)
        """Release what `prepare` opened when the stream never ran (or did): idempotent."""

    @abc.abstractmethod
    def stream(self, request: AnswerRequest) -> AsyncIterator[str]:
        """The answer's text in pieces, as they are produced."""

    @abc.abstractmethod
    def written(self, *, complete: bool) -> WrittenAnswer:
        """The answer to store: all of it (`complete`), or the part streamed so far."""


class ExtractiveAnswerer(Answerer):
    """No language model: the sentences of the chunks that best answer the question, verbatim,
    each followed by its chunk's marker (chat/answering/extractive.py). The sentences are chosen
    for what was searched, so a follow-up ("And in London?") is answered in its context, with
    the follow-up's own words deciding between the sentences. The text is produced whole: it
    is streamed as one piece, or in pieces of a few words when CHAT_STREAM_DELAY_MS paces the
    stream."""

    mode = Message.Mode.EXTRACTIVE

    def __init__(self) -> None:
        self._answer: ExtractiveAnswer | None = None
        self._streamed: list[str] = []

    async def prepare(self, request: AnswerRequest) -> None:
        """`prepare_here` on a worker thread."""
        await sync_to_async(self.prepare_here, thread_sensitive=False)(request)

    def prepare_here(self, request: AnswerRequest) -> bool:
        """Write the answer on the calling thread: `stream` then has it at once."""
        self._answer = _extractive_answer_counted(
            question=request.search_query,
            question_vector=request.query_vector,
            chunks=request.chunks,
            # A follow-up read in context: the sentence holding its own words answers it.
            focus=request.question if terms(request.question) else None,
            # A follow-up read in context: what comes after the previous answer is preferred.
            said=said_before(request.question, request.search_query, request.history),
            follows_bonus=followups.FOLLOWS_SAID_BONUS,
        )
        return True

    async def stream(self, request: AnswerRequest) -> AsyncIterator[str]:
        if self._answer is None:
            await self.prepare(request)
        pieces = self._answer.pieces()
        if not settings.CHAT_STREAM_DELAY_MS and pieces:
            # Produced whole and not paced: one piece, one frame or event for the transport.
            pieces = ["".join(pieces)]
        for piece in pieces:
            self._streamed.append(piece)  # handed to the transport: part of what was said
            yield piece

    def written(self, *, complete: bool) -> WrittenAnswer:
        if self._answer is None:
            return WrittenAnswer(content="", cited=[])
        if complete:
            return WrittenAnswer(content=self._answer.text, cited=self._answer.cited_chunks)
        streamed = "".join(self._streamed)
        sent = [(n, c) for n, c in self._answer.cited_chunks if f" [{n}]" in streamed]
        return WrittenAnswer(content=streamed, cited=sent)


_extractive_answer_counted = cpu_stage("answer")(extractive_answer)
