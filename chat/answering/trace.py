"""What one exchange has done so far, for the stored figures, the interruption record and the
one JSON log line per exchange (`exchange_log`, on the `sourced.exchange` logger)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.conf import settings

from chat import services
from chat.answering.answerers import Answerer, WrittenAnswer
from chat.answering.events import Event
from chat.answering.stage_cpu import stage_cpu_rounded
from chat.models import Message

if TYPE_CHECKING:
    from chat.transcript import MessageRow

logger = logging.getLogger("sourced.exchange")
retrieval_logger = logging.getLogger("sourced.retrieval")


@dataclass
class ExchangeTrace:
    """What one exchange has done so far: for the interruption record and the log line."""

    started: float = field(default_factory=time.perf_counter)
    first_event_ms: float | None = None
    retrieval_ms: float | None = None
    # Each side's ranking time (knowledge.retrieval.SearchResult), summed over the exchange's
    # searches (a fallback or a named document's is a second one); None: that side never ran.
    vector_ms: float | None = None
    lexical_ms: float | None = None
    best_similarity: float | None = None
    evidence: str | None = None  # the evidence decision's reason (evidence_signals.Reason)
    search_query: str = ""
    contextual: bool = False
    warning: str = ""
    answerer: Answerer | None = None
    # The documents whose text reached the answer so far (chat.models.DocumentGiven).
    given: tuple[int, ...] = ()
    cpu_ms: dict[str, float] = field(default_factory=dict)  # stage → CPU ms (stage_cpu.py)
    # The last retrieval's ranked chunks: (chunk id, fused score, cosine similarity).
    retrieved: list[tuple[int, float, float | None]] = field(default_factory=list)

    def sides_add(self, vector_ms: float | None, lexical_ms: float | None) -> None:
        """Count one search's per-side times (`SearchResult.vector_ms`, `.lexical_ms`)."""
        if vector_ms is not None:
            self.vector_ms = round((self.vector_ms or 0.0) + vector_ms, 1)
        if lexical_ms is not None:
            self.lexical_ms = round((self.lexical_ms or 0.0) + lexical_ms, 1)

    def warn(self, text: str) -> None:
        self.warning = f"{self.warning} {text}" if self.warning else text

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 1)

    def event(self, type_: str, data: dict[str, Any], *, row: MessageRow | None = None) -> Event:
        if self.first_event_ms is None:
            self.first_event_ms = self.elapsed_ms()
        return Event(type_, data, row=row)  # type: ignore[arg-type]

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


def exchange_log(exchange: ExchangeTrace, **fields: Any) -> None:
    """One structured line per exchange on the `sourced.exchange` logger: the fields of
    `docs/product.md §10`, and the query searched for (the question, or its rewrite: personal
    data) only when settings.CHAT_LOG_QUERIES is on."""
    record = {
        "event": "chat.exchange",
        "retrieval_ms": exchange.retrieval_ms,
        "vector_ms": exchange.vector_ms,
        "lexical_ms": exchange.lexical_ms,
        "best_similarity": (
            None if exchange.best_similarity is None else round(exchange.best_similarity, 4)
        ),
        "evidence": exchange.evidence,
        "contextual": exchange.contextual,
        "first_event_ms": exchange.first_event_ms,
        "total_ms": exchange.elapsed_ms(),
        "cpu_ms": stage_cpu_rounded(exchange.cpu_ms),
        **fields,
    }
    if settings.CHAT_LOG_QUERIES:
        record["search_query"] = exchange.search_query
    record["refused"] = record.get("status") == Message.Status.REFUSED
    if isinstance(record.get("best_similarity"), float):
        record["best_similarity"] = round(record["best_similarity"], 4)
    distances = [1 - s for _, _, s in exchange.retrieved if s is not None]
    record["candidates"] = len(exchange.retrieved)
    record["min_distance"] = round(min(distances), 4) if distances else None
    record["max_distance"] = round(max(distances), 4) if distances else None
    record.update(_answerer_figures(exchange.answerer))
    # The retrieval's line first: the exchange's line closes the exchange.
    if exchange.retrieved:
        retrieval_logger.info(
            json.dumps(
                {
                    "event": "chat.retrieval",
                    "message": fields.get("message"),
                    "chunk_ids": [chunk_id for chunk_id, _, _ in exchange.retrieved],
                    "scores": [round(score, 4) for _, score, _ in exchange.retrieved],
                    "similarities": [
                        None if s is None else round(s, 4) for _, _, s in exchange.retrieved
                    ],
                },
                default=str,
                sort_keys=True,
            )
        )
    logger.info(json.dumps(record, default=str, sort_keys=True))


def _answerer_figures(answerer: Answerer | None) -> dict[str, Any]:
    """The prompt's characters and the reply's estimated tokens of a generative answer
    (None for an extractive one: no prompt)."""
    prompt_chars = getattr(answerer, "prompt_chars", None)
    tokens_out = getattr(answerer, "tokens_out", None)
    return {"prompt_chars": prompt_chars, "tokens_out": tokens_out}
