"""The search for a question (steps 3-5 of chat/answering/pipeline.py): the query planned
from the conversation (chat/answering/followups.py), retrieval, the evidence check, and once
more with the plan's fallback before refusing.

A question that names a document the asker may read (chat/answering/named_documents.py) is
searched as any question first (refused as any question when nothing the asker may read
holds the answer); when that finds an answer, it is taken from the named document instead
when that document holds one as close (within NAMED_MARGIN)
(docs/decisions/0037-a-question-that-names-a-document.md). A question naming two or more
("Compare inventory.xlsx and suppliers.csv") is searched in each of them, each search checked
for evidence, and answered from the best passages of each that passes
(docs/decisions/0167-two-named-documents-compared.md).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async

from chat.answering.evidence import EMPTY_KB_REFUSAL, NO_EVIDENCE_REFUSAL, Refusal
from chat.answering.evidence_signals import (
    THRESHOLD_ON,
    UNKNOWN_IN_CONTEXT,
    EvidenceDecision,
    Reason,
    evidence_assess,
    evidence_outcome,
)
from chat.answering.exchange import StoredExchange
from chat.answering.extractive import sentence_vectors_preload
from chat.answering.followups import SearchPlan, search_plan_in_context, unknown_own_terms
from chat.answering.generative import search_plan_generative
from chat.answering.named_documents import (
    NamedDocument,
    named_documents_find,
    question_about,
)
from chat.answering.request import ValidatedRequest
from chat.answering.stage_cpu import cpu_stage, stage_cpu_add
from chat.answering.trace import ExchangeTrace
from chat.answering.turns_gate import answers_in_turn
from chat.models import Message
from knowledge import embedding
from knowledge.access import Reader
from knowledge.retrieval import (
    LexicalSide,
    RetrievedChunk,
    SearchResult,
    chunks_search,
    lexical_side_run,
)
from knowledge.search_scope import knowledge_base_is_empty

# A named document's answer is taken when its best passage is at most this much (cosine) below
# the best found among everything: 0, chosen on folds of demo/eval/named.json (a larger margin
# lets a named document that does not hold the answer answer it;
# docs/decisions/0037-a-question-that-names-a-document.md).
NAMED_MARGIN = 0.0
TRUNCATION_WARNING = (
    "Your question is longer than the search model can read ({limit} word pieces): only its "
    "beginning was used to find sources."
)


@dataclass(frozen=True)
class Found:
    """What the search found (steps 3-5): the query used, the qualifying chunks, or why not."""

    query: str
    contextual: bool
    query_vector: np.ndarray | None
    qualifying: list[RetrievedChunk]
    refusal: Refusal | None
    # The document the question named, when the answer was found in it alone.
    searched_document: NamedDocument | None = None
    # Every document the question named that the answer was found in (two or more named:
    # `searched_document` is the first of them).
    searched_documents: tuple[NamedDocument, ...] = ()
    # The evidence check's reason for this search (None: nothing was searched).
    evidence: Reason | None = None


@cpu_stage("retrieve")
def _retrieve(
    *,
    query: str,
    top_k: int,
    reader: Reader,
    document_ids: list[int] | None,
    query_vector: np.ndarray,
    prefer_document_ids: Sequence[int] = (),
    lexical_side: LexicalSide | None = None,
) -> SearchResult | None:
    """The ranked chunks `reader` may read for the query; None when nothing is searched for
    them (the knowledge base is empty *for them*: a reader of some collections is not told
    whether the others hold anything). The stored
    vectors of their sentences are read too (into the sentence vector cache), so that the
    evidence check and the answer that follow embed nothing but the question. Whether the
    knowledge base is empty is asked only when the search found nothing (a query fewer for
    every other question)."""
    result = chunks_search(
        query=query,
        reader=reader,
        top_k=top_k,
        document_ids=document_ids,
        query_vector=query_vector,
        prefer_document_ids=prefer_document_ids,
        lexical_side=lexical_side,
    )
    if not result.chunks:
        return None if knowledge_base_is_empty(reader=reader) else result
    sentence_vectors_preload(result.chunks)
    return result


@cpu_stage("retrieve")
def _lexical_ahead(
    *, query: str, top_k: int, reader: Reader, document_ids: list[int] | None
) -> LexicalSide:
    """The lexical side of the first search, run while the question is being embedded."""
    return lexical_side_run(query=query, reader=reader, top_k=top_k, document_ids=document_ids)


async def query_embed(query: str) -> tuple[np.ndarray, bool]:
    """(the query's unit vector, whether the query was truncated to the model's limit); the
    embedding model never runs on the event loop: where questions go through the batcher
    (server processes) the loop waits for the batcher's thread, otherwise the model runs in a
    worker thread."""
    # Alone: no other answer holds a turn, so no other question can join it in the batcher.
    alone = answers_in_turn() <= 1
    submitted = embedding.embed_query_submit(query, alone=alone, start=False)
    if submitted is None:  # no batcher, or not started yet (`_embed` starts it)
        return await sync_to_async(_embed, thread_sensitive=False)(query, alone=alone)
    vector, truncated, cpu_ms = await asyncio.wrap_future(submitted)
    stage_cpu_add("embed", cpu_ms)  # what the batcher's thread spent for it
    return vector, truncated


@cpu_stage("embed")
def _embed(query: str, *, alone: bool) -> tuple[np.ndarray, bool]:
    embedded = embedding.embed_query(query, alone=alone)
    stage_cpu_add("embed", embedding.batched_cpu_ms())  # the model's run on the batcher's thread
    return embedded


@dataclass(frozen=True)
class _Assessed:
    """What one search's thread hop returns: the retrieval, the evidence decision on it and its
    outcome (`evidence_outcome`), and whether the question's own words name something unknown
    (asked only for a search read in context that the evidence would answer)."""

    result: SearchResult
    decision: EvidenceDecision
    qualifying: list[RetrievedChunk]
    refusal: Refusal | None
    unknown_terms: bool


def _retrieve_assessed(
    *,
    question: str,
    query: str,
    top_k: int,
    reader: Reader,
    document_ids: list[int] | None,
    query_vector: np.ndarray,
    contextual: bool,
    threshold: float,
    prefer_document_ids: Sequence[int] = (),
    lexical_side: LexicalSide | None = None,
) -> _Assessed | None:
    """`_retrieve`, then the evidence check on what it found and, for a search read in context
    that the evidence would answer, the question's unknown own words: on one thread hop (the
    socket's or the request's own thread; the passage's sentences are embedded there when their
    stored vectors are missing). None as `_retrieve` (nothing is searched for the reader)."""
    result = _retrieve(
        query=query,
        top_k=top_k,
        reader=reader,
        document_ids=document_ids,
        query_vector=query_vector,
        prefer_document_ids=prefer_document_ids,
        lexical_side=lexical_side,
    )
    if result is None:
        return None
    decision = _evidence_assess(
        question=query,
        question_vector=result.query_vector,
        chunks=result.chunks,
        threshold=threshold,
        reader=reader,
        threshold_on=THRESHOLD_ON,
    )
    qualifying, refusal = evidence_outcome(result.chunks, decision, threshold)
    unknown = contextual and refusal is None and bool(unknown_own_terms(question, reader=reader))
    return _Assessed(result, decision, qualifying, refusal, unknown)


_evidence_assess = cpu_stage("evidence")(evidence_assess)


async def _search_once(
    exchange: ExchangeTrace,
    *,
    question: str,
    query: str,
    query_vector: np.ndarray,
    contextual: bool,
    plan: SearchPlan,
    document_ids: list[int] | None,
    stored: StoredExchange,
    lexical_side: LexicalSide | None = None,
) -> Found:
    """Retrieve for `query` (`question`, or the question read in context) among what the asker
    may read (`stored.reader`) and check the evidence against the same, on one thread hop
    (`_retrieve_assessed`). `lexical_side`: the search's lexical ranking, run ahead
    (`_lexical_ahead`)."""
    threshold = stored.threshold
    assessed = await database_sync_to_async(_retrieve_assessed)(
        question=question,
        query=query,
        top_k=stored.top_k,
        reader=stored.reader,
        document_ids=document_ids,
        query_vector=query_vector,
        contextual=contextual,
        threshold=threshold,
        prefer_document_ids=plan.prefer_documents if contextual else (),
        lexical_side=lexical_side,
    )
    if assessed is None:
        return Found(query, contextual, query_vector, [], EMPTY_KB_REFUSAL)
    result = assessed.result
    exchange.sides_add(result.vector_ms, result.lexical_ms)
    exchange.best_similarity = result.best_similarity
    exchange.retrieved = [(c.chunk_id, c.score, c.similarity) for c in result.chunks]
    reason, qualifying, refusal = assessed.decision.reason, assessed.qualifying, assessed.refusal
    if assessed.unknown_terms:
        # The follow-up's own words name something the documents never mention. When it reads
        # in context first (it leans on the conversation, replies to it or picks up its words)
        # after an answered question, what was found answers the conversation, perhaps not
        # this: given with the notice. A question that stands on its own, or one after a
        # refusal (the conversation has no subject in the documents), is refused.
        after_an_answer = bool(stored.history) and stored.history[-1].answered
        if plan.contextual and query == plan.query and after_an_answer:
            reason = UNKNOWN_IN_CONTEXT
        else:
            reason, qualifying, refusal = "unknown-terms", [], NO_EVIDENCE_REFUSAL
    return Found(query, contextual, result.query_vector, qualifying, refusal, evidence=reason)


def _narrowed(document_ids: list[int] | None, within: Sequence[int]) -> list[int] | None:
    """The request's document filter narrowed to `within` (when given)."""
    if not within:
        return document_ids
    return sorted(set(within) & set(document_ids) if document_ids is not None else set(within))


async def _search_everywhere(
    exchange: ExchangeTrace,
    *,
    question: str,
    plan: SearchPlan,
    vector: np.ndarray,
    embedded: asyncio.Future | None,
    request: ValidatedRequest,
    stored: StoredExchange,
    lexical_side: LexicalSide | None = None,
) -> Found:
    """The planned query among everything the request searches and, when the evidence check
    refuses it, the plan's fallback once more. `lexical_side`: the first search's lexical
    ranking, run ahead."""
    found = await _search_once(
        exchange,
        question=question,
        query=plan.query,
        query_vector=vector,
        contextual=plan.contextual,
        plan=plan,
        document_ids=request.document_ids,
        stored=stored,
        lexical_side=lexical_side,
    )
    if found.refusal is not None and found.refusal is not EMPTY_KB_REFUSAL and plan.fallback:
        if plan.contextual and embedded is not None:  # the question as written: embedded early
            fallback_vector, _ = await embedded
        else:
            fallback_vector, _ = await query_embed(plan.fallback)
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
    return found


def _best_similarity(chunks: Sequence[RetrievedChunk]) -> float:
    return max((c.similarity for c in chunks if c.similarity is not None), default=0.0)


async def _prefer_named(
    exchange: ExchangeTrace,
    found: Found,
    named: NamedDocument,
    *,
    question: str,
    plan: SearchPlan,
    vector: np.ndarray,
    stored: StoredExchange,
) -> Found:
    """`found` (an answer found among everything) answered from the document the question
    names when that document holds passages the evidence check accepts, the best of them
    within NAMED_MARGIN (cosine) of the best found everywhere; `found` unchanged otherwise. No
    second search when everything `found` qualifies is from that document."""
    if all(chunk.document_id == named.id for chunk in found.qualifying):
        return replace(found, searched_document=named, searched_documents=(named,))
    in_named = await _search_once(
        exchange,
        question=question,
        query=found.query,
        query_vector=found.query_vector if found.query_vector is not None else vector,
        contextual=found.contextual,
        plan=plan,
        document_ids=[named.id],
        stored=stored,
    )
    if in_named.refusal is not None or _best_similarity(in_named.qualifying) < (
        _best_similarity(found.qualifying) - NAMED_MARGIN
    ):
        return found
    return replace(in_named, searched_document=named, searched_documents=(named,))


def _interleaved(lists: Sequence[Sequence[RetrievedChunk]]) -> list[RetrievedChunk]:
    """The chunks of `lists` by rank: every list's first, then every list's second, ..."""
    merged: list[RetrievedChunk] = []
    for rank in range(max((len(chunks) for chunks in lists), default=0)):
        merged.extend(chunks[rank] for chunks in lists if rank < len(chunks))
    return merged


async def _search_each_named(
    exchange: ExchangeTrace,
    named: Sequence[NamedDocument],
    *,
    question: str,
    plan: SearchPlan,
    vector: np.ndarray,
    request: ValidatedRequest,
    stored: StoredExchange,
) -> Found | None:
    """The question searched in each document it names (two or more), as asked of that
    document alone (`question_about`: the other names left out), each search checked for
    evidence on its own; the passages of those that pass, the best of each first
    (`_interleaved`), with the documents they come from; None when none passes."""
    answered: list[tuple[NamedDocument, Found]] = []
    for document in named:
        within = _narrowed(request.document_ids, [document.id])
        if not within:
            continue
        query = question_about(plan.query, document, named)
        query_vector = vector if query == plan.query else (await query_embed(query))[0]
        in_named = await _search_once(
            exchange,
            question=question,
            query=query,
            query_vector=query_vector,
            contextual=plan.contextual,
            plan=plan,
            document_ids=within,
            stored=stored,
        )
        if in_named.refusal is None and in_named.qualifying:
            answered.append((document, in_named))
    if not answered:
        return None
    return replace(
        answered[0][1],
        query=plan.query,
        query_vector=vector,
        qualifying=_interleaved([found.qualifying for _, found in answered])[: stored.top_k],
        searched_document=answered[0][0],
        searched_documents=tuple(document for document, _ in answered),
    )


@dataclass(frozen=True)
class Planned:
    """The search planned for a question (`search_planned`)."""

    plan: SearchPlan
    named: list[NamedDocument]


def search_planned(stored: StoredExchange, *, within: list[int] | None) -> Planned:
    """The search planned from the conversation for the stored question (as written when it
    has no earlier turn) and the documents it names that the asker may read (`within`: the
    request's document filter). Reads the database: the pipeline runs it on the store's thread
    hop, right after the store (`exchange_store_then`)."""
    question = stored.begun.question.content
    plan = SearchPlan(query=question)
    if stored.history:
        plan = search_plan_in_context(question, stored.history, reader=stored.reader)
    return Planned(plan, named_documents_find(question, reader=stored.reader, within=within))


async def question_search(
    exchange: ExchangeTrace,
    *,
    request: ValidatedRequest,
    stored: StoredExchange,
    question: str,
    embedded: asyncio.Future | None,
) -> Found:
    """Search for the question read with its conversation (chat/answering/followups.py): the
    planned query first and, when the evidence check refuses it, the plan's fallback once
    more before refusing. A question naming a document the asker may read (and that the
    request's document filter keeps) and answered so is answered from that document when it
    holds a passage as close (`_prefer_named`; `Found.searched_document` then says
    which). A question naming two or more is searched in each of them first
    (`_search_each_named`), and as any question when none of them holds an answer."""
    started = time.perf_counter()
    planned = stored.then  # `search_planned`, run on the store's hop (`exchange_store_then`)
    if isinstance(planned, Exception):
        raise planned  # it failed there
    plan, named = planned.plan, planned.named
    if stored.mode == Message.Mode.GENERATIVE:
        plan = await search_plan_generative(plan, question=question, history=stored.history)
    # The first search's lexical ranking needs no vector: it runs on the database thread while
    # the question is embedded on the model's (unless the question names several documents:
    # each is searched first; or its vector is there already: no wait to fill).
    ahead = None
    vector_ready = not plan.contextual and (
        request.supplied_vector is not None or (embedded is not None and embedded.done())
    )
    if len(named) <= 1 and not vector_ready:
        ahead = asyncio.ensure_future(
            database_sync_to_async(_lexical_ahead)(
                query=plan.query,
                top_k=stored.top_k,
                reader=stored.reader,
                document_ids=request.document_ids,
            )
        )
    try:
        if plan.contextual:
            if embedded is not None and plan.fallback != question:
                embedded.cancel()
                embedded = None
            vector, truncated = await query_embed(plan.query)
        elif request.supplied_vector is not None:
            vector, truncated = request.supplied_vector, False
        elif embedded is not None:
            vector, truncated = await embedded
        else:
            vector, truncated = await query_embed(question)
        lexical_side = await ahead if ahead is not None else None
    except BaseException:
        if ahead is not None and not ahead.done():
            ahead.cancel()
        raise
    if truncated:
        exchange.warning = TRUNCATION_WARNING.format(limit=embedding.MAX_TOKENS)
    found = None
    if len(named) > 1:
        found = await _search_each_named(
            exchange,
            named,
            question=question,
            plan=plan,
            vector=vector,
            request=request,
            stored=stored,
        )
    if found is None:
        found = await _search_everywhere(
            exchange,
            question=question,
            plan=plan,
            vector=vector,
            embedded=embedded,
            request=request,
            stored=stored,
            lexical_side=lexical_side,
        )
        if len(named) == 1 and found.refusal is None:
            found = await _prefer_named(
                exchange,
                found,
                named[0],
                question=question,
                plan=plan,
                vector=vector,
                stored=stored,
            )
    exchange.retrieval_ms = round((time.perf_counter() - started) * 1000, 1)
    exchange.search_query, exchange.contextual = found.query, found.contextual
    exchange.evidence = found.evidence or exchange.evidence  # what is answered or refused: why
    return found
