"""Hybrid retrieval: pgvector cosine k-NN + PostgreSQL full text, fused by score.

Only the documents the reader may read (knowledge/access.py, the one read rule) that are
enabled, in status `ready` and not expired are ever searched, optionally narrowed to a chosen set
of documents. Both conditions are inside the SQL of each side, before it ranks: a document the
reader may not read never takes a top-k place, and the vector side's iterative scan keeps
scanning until enough readable rows are found (docs/decisions/0075-retrieval-for-a-reader.md).
Every search function takes the `Reader` as a required keyword argument (`reader_for(user)` of
the request; `knowledge.access.OPERATOR` for the operator's tools); anything else raises
TypeError. Each side fetches a candidate list deeper than top_k:

- vector: the HNSW k-NN on the question's embedding;
- lexical: the question's terms (PostgreSQL's websearch parse, OR-ed) weighted by their inverse
  document frequency in the knowledge base (knowledge/vocabulary.py); a chunk scores the summed
  weights of the terms it holds. Only chunks holding the question's rarest terms are
  candidates (LEXICAL_CANDIDATE_BUDGET), which bounds the cost on a large knowledge base.

The two candidate lists are fused by score: cosine similarity + LEXICAL_WEIGHT (0.5) × the
lexical score relative to the best lexical candidate's (`scores_fuse`; lexical-only candidates
get their cosine in one more query); when one side finds nothing the other stands alone. A
follow-up searched in its conversation's context (`prefer_document_ids`) is still fused by
reciprocal rank (k = 60), the conversation's documents forming a third ranking
(chat/answering/followups.py).

Why score fusion, the IDF weights and the recency rule, with the figures:
docs/decisions/0002-retrieval-score-fusion.md.

Expired documents (`Document.expires_at` in the past) are never searched, like disabled ones.

Recency: when chunks score practically the same (within RECENCY_MARGIN of each other, relative,
on whichever score ranks them: the fused score, the cosine or the lexical score), those of a
document updated on a later day (UTC) come first; within a day the order stays the score's,
then the chunk id's. Runs of near-equal scores are formed from the best down, each run
holding the scores within the margin of its best. The vector and lexical rankings settle their
own ties the same way before they are fused.

The first search of a process builds the vocabulary (servers build it at startup,
knowledge/warm_up.py).

This module runs a search and builds its results (`chunks_search`); the parts live by job in
knowledge/search_scope.py (what a reader may search), knowledge/vector_search.py (the vector side
and the row counts that choose exact search), knowledge/lexical_search.py (the lexical side) and
knowledge/ranking.py (fusion and the recency tie-break).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from django.db import connection

from knowledge import embedding
from knowledge.access import Reader
from knowledge.lexical_search import chunks_search_lexical, lexical_query
from knowledge.models import Chunk, Document, Embedding
from knowledge.personal import personal_file_label
from knowledge.ranking import (
    CHUNK_DAY_SQL,
    days_read,
    preferred_ranking,
    recency_tie_break,
    reciprocal_rank_fusion,
    scores_fuse,
    tie_runs,
    tied_ids,
)
from knowledge.search_scope import reader_required
from knowledge.sql_arrays import bigint_array
from knowledge.vector_search import (
    candidate_depth,
    chunks_search_vector,
    similarities_for,
    vector_text,
)

Mode = Literal["hybrid", "vector", "lexical"]
MODES: tuple[str, ...] = ("hybrid", "vector", "lexical")
TOP_K_MIN, TOP_K_MAX, TOP_K_DEFAULT = 1, 20, 5
EXCERPT_CHARS = 200


@dataclass(frozen=True)
class RetrievedChunk:
    chunk_id: int
    document_id: int
    document_title: str
    document_url: str
    chunk_index: int
    page: int | None
    section: str | None
    text: str
    excerpt: str
    similarity: float | None  # cosine similarity to the question (None: no embedding)
    score: float  # fused score (higher is better)
    vector_rank: int | None = None
    lexical_rank: int | None = None
    sheet: str | None = None  # spreadsheets: the sheet of the chunk's rows
    cells: str | None = None  # spreadsheets: the range its rows cover, "A4:E6"
    ocr_confidence: float | None = None  # read by OCR from a scanned page: mean confidence

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SearchResult:
    chunks: list[RetrievedChunk]
    query_vector: np.ndarray | None
    truncated: bool  # the question was cut to fit the embedding model
    # Wall-clock ms of each side's ranking (None: that side did not run), for the logs.
    vector_ms: float | None = None
    lexical_ms: float | None = None

    @property
    def best_similarity(self) -> float | None:
        values = [c.similarity for c in self.chunks if c.similarity is not None]
        return max(values) if values else None


@dataclass(frozen=True)
class LexicalSide:
    """The lexical ranking of a hybrid search, run ahead of it (`lexical_side_run`: while the
    question is being embedded): what `chunks_search` computes for the same query, reader,
    top_k and document filter, which it then uses instead of running it again."""

    query: str
    reader: Reader
    top_k: int
    document_ids: tuple[int, ...] | None
    hits: tuple[tuple[int, float], ...]
    ms: float | None  # wall-clock ms of its ranking (None: the query had no term to rank)

    def serves(
        self, *, query: str, reader: Reader, top_k: int, document_ids: Sequence[int] | None
    ) -> bool:
        """Whether it is the lexical side of a search with these arguments."""
        return (
            self.query == query
            and self.reader is reader
            and self.top_k == top_k
            and self.document_ids == (None if document_ids is None else tuple(document_ids))
        )


def lexical_side_run(
    *, query: str, reader: Reader, top_k: int, document_ids: Sequence[int] | None = None
) -> LexicalSide:
    """The lexical side of `chunks_search(query=query, reader=reader, top_k=top_k,
    document_ids=document_ids)` (hybrid), to pass it as `lexical_side`. Reads the database."""
    reader_required(reader)
    validate_top_k(top_k)
    started = time.perf_counter()
    lexical = lexical_query(query, reader=reader)
    hits: list[tuple[int, float]] = []
    if lexical is not None:
        hits = chunks_search_lexical(
            question=query,
            limit=candidate_depth(top_k),
            reader=reader,
            document_ids=document_ids,
            query=lexical,
        )
    return LexicalSide(
        query=query,
        reader=reader,
        top_k=top_k,
        document_ids=None if document_ids is None else tuple(document_ids),
        hits=tuple(hits),
        ms=None if lexical is None else round((time.perf_counter() - started) * 1000, 1),
    )


def excerpt_of(text: str, limit: int = EXCERPT_CHARS) -> str:
    """The first `limit` characters of `text`, cut at a word boundary, with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def validate_top_k(top_k: int) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise ValueError("top_k must be a whole number")
    if not TOP_K_MIN <= top_k <= TOP_K_MAX:
        raise ValueError(f"top_k must be between {TOP_K_MIN} and {TOP_K_MAX}")
    return top_k


def chunks_search(
    *,
    query: str,
    reader: Reader,
    top_k: int = TOP_K_DEFAULT,
    mode: Mode = "hybrid",
    document_ids: Sequence[int] | None = None,
    query_vector: np.ndarray | None = None,
    prefer_document_ids: Sequence[int] = (),
    lexical_side: LexicalSide | None = None,
) -> SearchResult:
    """Rank the chunks `reader` may read for `query` (the module docstring says which).

    `query_vector` (unit length, 384 floats), when given, is used instead of embedding the
    query. `prefer_document_ids` (hybrid mode): the documents a conversation is about (a
    follow-up question's); their candidates form a third ranking in the fusion, so they win
    when the other rankings place them close (chat/answering/followups.py).
    `lexical_side` (hybrid mode): the lexical ranking already run for these arguments
    (`lexical_side_run`), used when it `serves` them, else the ranking is run here. Raises
    ValueError for a bad top_k or mode.
    """
    reader_required(reader)
    validate_top_k(top_k)
    if mode not in MODES:
        raise ValueError(f"mode must be one of: {', '.join(MODES)}")
    truncated = False
    if query_vector is None:
        query_vector, truncated = embedding.embed_query(query)
    depth = candidate_depth(top_k)

    vector_hits: list[tuple[int, float]] = []
    lexical_hits: list[tuple[int, float]] = []
    timed: dict[str, float] = {}
    vector = vector_text(query_vector)  # the question's vector as text, for every query
    if mode in ("hybrid", "vector"):
        vector_started = time.perf_counter()
        vector_hits = chunks_search_vector(
            query_vector=vector, limit=depth, reader=reader, document_ids=document_ids
        )
        timed["vector_ms"] = round((time.perf_counter() - vector_started) * 1000, 1)
    if mode in ("hybrid", "lexical"):
        arguments = {"query": query, "reader": reader, "top_k": top_k, "document_ids": document_ids}
        if not (mode == "hybrid" and lexical_side and lexical_side.serves(**arguments)):
            lexical_side = lexical_side_run(**arguments)
        lexical_hits = list(lexical_side.hits)
        if lexical_side.ms is not None:
            timed["lexical_ms"] = lexical_side.ms

    # Each side settles its own ties first: two copies of a passage tie exactly on both sides,
    # and each side's order of them (by id) would otherwise decide the fused order.
    days: dict[int, int] = {}
    similarity = dict(vector_hits)
    # Lexical-only candidates need their cosine to be fused by score.
    lexical_only = []
    if mode == "hybrid" and not prefer_document_ids:
        lexical_only = [cid for cid, _ in lexical_hits if cid not in similarity]
    # The days of both sides' runs (the fused ranking's runs are nearly always among them) and
    # the lexical-only candidates' cosines: one statement.
    similarity.update(
        _days_and_similarities_read(
            [
                *tied_ids(vector_hits, tie_runs(vector_hits, len(vector_hits))),
                *tied_ids(lexical_hits, tie_runs(lexical_hits, len(lexical_hits))),
            ],
            days,
            similarity_ids=lexical_only,
            query_vector=vector,
        )
    )
    vector_hits = recency_tie_break(vector_hits, limit=len(vector_hits), days=days)
    lexical_hits = recency_tie_break(lexical_hits, limit=len(lexical_hits), days=days)
    if mode == "vector":
        ranked = vector_hits
    elif mode == "hybrid" and prefer_document_ids and (vector_hits or lexical_hits):
        # A follow-up: the documents its conversation is about form a third ranking.
        rankings = [[cid for cid, _ in hits] for hits in (vector_hits, lexical_hits) if hits]
        rankings.append(preferred_ranking(rankings, prefer_document_ids))
        ranked = reciprocal_rank_fusion(rankings)
    elif mode == "hybrid":
        ranked = scores_fuse(vector_hits, lexical_hits, similarity)
    else:
        ranked = lexical_hits
    fused = recency_tie_break(ranked, limit=top_k, days=days)[:top_k]
    # Lexical-only hits: their cosine similarity (the evidence check needs every chunk's).
    missing = [cid for cid, _ in fused if cid not in similarity]
    if missing:
        similarity.update(similarities_for(missing, vector))
    if not fused:
        return SearchResult(chunks=[], query_vector=query_vector, truncated=truncated, **timed)
    vector_rank = {cid: rank for rank, (cid, _) in enumerate(vector_hits, start=1)}
    lexical_rank = {cid: rank for rank, (cid, _) in enumerate(lexical_hits, start=1)}

    # The ranking queries and this read are separate statements: a document re-ingested in
    # between has replaced the chunks they found (new ids). Those are left out of this answer
    # rather than failing it; the next search finds the new chunks.
    chunks = _chunks_read([cid for cid, _ in fused])
    results = [
        RetrievedChunk(
            **chunks[chunk_id],
            similarity=similarity.get(chunk_id),
            score=score,
            vector_rank=vector_rank.get(chunk_id),
            lexical_rank=lexical_rank.get(chunk_id),
        )
        for chunk_id, score in fused
        if chunk_id in chunks
    ]
    return SearchResult(chunks=results, query_vector=query_vector, truncated=truncated, **timed)


def _days_and_similarities_read(
    day_ids: Sequence[int],
    days: dict[int, int],
    *,
    similarity_ids: Sequence[int],
    query_vector: str,
) -> dict[int, float]:
    """`days_read(day_ids, days)` and `similarities_for(similarity_ids, query_vector)` (whose
    result it returns) in one statement, none when neither has anything to read (when both
    are read, the days of `similarity_ids` are added to `days` too). `query_vector`: the
    question's vector as text (`vector_text`)."""
    wanted_days = {chunk_id for chunk_id in day_ids if chunk_id not in days}
    if not similarity_ids:
        days_read(wanted_days, days)
        return {}
    if not wanted_days:
        return similarities_for(similarity_ids, query_vector)
    ids = sorted({*wanted_days, *(int(pk) for pk in similarity_ids)})
    with connection.cursor() as cursor:
        cursor.execute(
            _DAYS_AND_SIMILARITIES_SQL,
            [
                bigint_array(sorted(int(pk) for pk in similarity_ids)),
                query_vector,
                embedding.model_version(),
                bigint_array(ids),
            ],
        )
        rows = cursor.fetchall()
    similarity = {}
    for chunk_id, day, distance in rows:
        days[chunk_id] = day
        if distance is not None:
            similarity[chunk_id] = 1.0 - float(distance)
    return similarity


# A chunk's document's day as `days_read` computes it, and the cosine distance of its current
# embedding to the question as `similarities_for` does (only for the chunks asked: NULL
# otherwise, and for a chunk without one).
_DAYS_AND_SIMILARITIES_SQL = (
    f"SELECT c.id, {CHUNK_DAY_SQL}, "
    "CASE WHEN c.id = ANY(%s::bigint[]) THEN e.vector <=> %s::vector END "
    f"FROM {Chunk._meta.db_table} c "
    f"LEFT JOIN {Embedding._meta.db_table} e ON e.chunk_id = c.id AND e.model = %s "
    "WHERE c.id = ANY(%s::bigint[])"
)


def _chunks_read(chunk_ids: Sequence[int]) -> dict[int, dict]:
    """The fields of `RetrievedChunk` that come from the database, by chunk id, for those of
    `chunk_ids` that exist: one statement, written out (it runs for every question)."""
    with connection.cursor() as cursor:
        cursor.execute(_CHUNKS_SQL, [bigint_array(sorted(chunk_ids))])
        rows = cursor.fetchall()
    chunks = {}
    for row in rows:
        (chunk_id, document_id, title, owner_id, url, index, page, section, text) = row[:9]
        chunks[chunk_id] = {
            "chunk_id": chunk_id,
            "document_id": document_id,
            "document_title": personal_file_label(title) if owner_id is not None else title,
            "document_url": url or "",
            "chunk_index": index,
            "page": page,
            "section": section,
            "text": text,
            "excerpt": excerpt_of(text),
            "sheet": row[9],
            "cells": row[10],
            "ocr_confidence": row[11],
        }
    return chunks


# A personal file's title is shown as its label (`document_is_personal`: an owner is set); the
# link is the document's `url` (its metadata's "url", `Document.url`).
_CHUNKS_SQL = (
    "SELECT c.id, c.document_id, d.title, d.owner_id, "
    "CASE WHEN jsonb_typeof(d.metadata) = 'object' THEN d.metadata ->> 'url' END, "
    "c.index, c.page, c.section, c.text, c.sheet, c.cells, c.ocr_confidence "
    f"FROM {Chunk._meta.db_table} c JOIN {Document._meta.db_table} d ON d.id = c.document_id "
    "WHERE c.id = ANY(%s::bigint[])"
)
