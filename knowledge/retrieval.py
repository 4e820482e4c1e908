"""Hybrid retrieval: pgvector cosine k-NN + PostgreSQL full text, fused by reciprocal rank.

Only enabled documents in status `ready` are ever searched, optionally narrowed to a chosen set
of documents. Each side fetches a candidate list deeper than top_k; reciprocal rank fusion
(k=60) merges them; when one side finds nothing the other stands alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection, transaction
from django.db.models import F, QuerySet
from pgvector.django import CosineDistance

from knowledge import embedding
from knowledge.models import Chunk, Document, Embedding

Mode = Literal["hybrid", "vector", "lexical"]
MODES: tuple[str, ...] = ("hybrid", "vector", "lexical")
TOP_K_MIN, TOP_K_MAX, TOP_K_DEFAULT = 1, 20, 5
RRF_K = 60
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

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class SearchResult:
    chunks: list[RetrievedChunk]
    query_vector: np.ndarray | None
    truncated: bool  # the question was cut to fit the embedding model

    @property
    def best_similarity(self) -> float | None:
        values = [c.similarity for c in self.chunks if c.similarity is not None]
        return max(values) if values else None


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


def searchable_chunks(document_ids: Iterable[int] | None = None) -> QuerySet[Chunk]:
    """Chunks of enabled, ready documents (optionally only of the given documents)."""
    queryset = Chunk.objects.filter(document__enabled=True, document__status=Document.Status.READY)
    if document_ids is not None:
        queryset = queryset.filter(document_id__in=list(document_ids))
    return queryset


def knowledge_base_is_empty() -> bool:
    return not searchable_chunks().exists()


def candidate_depth(top_k: int) -> int:
    return max(4 * top_k, 40)


def vector_search_queryset(
    *, query_vector: np.ndarray, limit: int, document_ids: Sequence[int] | None = None
) -> QuerySet[Embedding]:
    """The k-NN query: `ORDER BY vector <=> q LIMIT limit`, the shape the HNSW index serves.

    Yields (chunk id, cosine distance) rows. Evaluate it inside a transaction after
    `vector_search_settings()`, as `chunks_search_vector` does.
    """
    queryset = Embedding.objects.filter(
        model=embedding.model_version(),
        chunk__document__enabled=True,
        chunk__document__status=Document.Status.READY,
    )
    if document_ids is not None:
        queryset = queryset.filter(chunk__document_id__in=list(document_ids))
    return (
        queryset.annotate(distance=CosineDistance("vector", query_vector.tolist()))
        .order_by("distance")
        .values_list("chunk_id", "distance")[:limit]
    )


def vector_search_settings(*, limit: int) -> None:
    """SET LOCAL the HNSW scan settings for the current transaction (must be inside one)."""
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        # An int formatted in, not a bound parameter: SET does not take parameters when
        # psycopg binds on the server side.
        cursor.execute(f"SET LOCAL hnsw.ef_search = {max(40, int(limit))}")


def chunks_search_vector(
    *, query_vector: np.ndarray, limit: int, document_ids: Sequence[int] | None = None
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) best first, through the HNSW index.

    HNSW applies WHERE filters after the index scan, so a filter could starve the result;
    pgvector's iterative scan keeps scanning until `limit` rows pass the filters. Both settings
    are SET LOCAL inside the transaction that evaluates the query, so they never leak to a
    pooled connection.
    """
    queryset = vector_search_queryset(
        query_vector=query_vector, limit=limit, document_ids=document_ids
    )
    with transaction.atomic():
        vector_search_settings(limit=limit)
        rows = list(queryset)
    # relaxed_order may return rows slightly out of order: re-sort (ties by chunk id).
    rows.sort(key=lambda row: (row[1], row[0]))
    return [(chunk_id, 1.0 - float(distance)) for chunk_id, distance in rows]


def lexical_query_text(question: str) -> str:
    """PostgreSQL's websearch parse of the question with its terms OR-ed together.

    websearch_to_tsquery AND-s every term, so a natural-language question rarely matches
    anything whole; OR-ing the same lexemes lets partial matches count while ts_rank still
    rewards chunks that hold more of the terms. Quoted phrases keep their phrase operator;
    excluded terms (`-word`) stay AND-ed (`(a | b) & !c`). Empty when the question has only
    stop words or only exclusions.
    """
    with connection.cursor() as cursor:
        cursor.execute("SELECT websearch_to_tsquery('english', %s)::text", [question])
        (parsed,) = cursor.fetchone()
    # The top level of websearch's output is joined by " & " (phrases use <->, "or" gives |).
    terms = [term for term in (parsed or "").split(" & ") if term]
    wanted = [term for term in terms if not term.startswith("!")]
    excluded = [term for term in terms if term.startswith("!")]
    if not wanted:
        return ""
    text = " | ".join(wanted)
    if excluded:
        text = f"({text}) & " + " & ".join(excluded)
    return text


def chunks_search_lexical(
    *, question: str, limit: int, document_ids: Sequence[int] | None = None
) -> list[tuple[int, float]]:
    """(chunk id, full-text rank) best first."""
    text = lexical_query_text(question)
    if not text:
        return []
    # The lexemes are already stemmed by the english parse above; "simple" keeps them as they
    # are (re-parsing with "english" would drop stems that happen to be stop words: "other").
    query = SearchQuery(text, config="simple", search_type="raw")
    rows = (
        searchable_chunks(document_ids)
        .filter(search_vector=query)
        .annotate(rank=SearchRank(F("search_vector"), query, cover_density=True))
        .order_by("-rank", "id")
        .values_list("id", "rank")[:limit]
    )
    return [(chunk_id, float(rank)) for chunk_id, rank in rows]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[int]], *, k: int = RRF_K
) -> list[tuple[int, float]]:
    """Fuse ranked id lists: score = Σ 1/(k + rank); ties broken by id for determinism."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def similarities_for(chunk_ids: Sequence[int], query_vector: np.ndarray) -> dict[int, float]:
    """Cosine similarity of the question to each given chunk (for lexical-only hits)."""
    if not chunk_ids:
        return {}
    rows = (
        Embedding.objects.filter(chunk_id__in=list(chunk_ids), model=embedding.model_version())
        .annotate(distance=CosineDistance("vector", query_vector.tolist()))
        .values_list("chunk_id", "distance")
    )
    return {chunk_id: 1.0 - float(distance) for chunk_id, distance in rows}


def validate_top_k(top_k: int) -> int:
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise ValueError("top_k must be a whole number")
    if not TOP_K_MIN <= top_k <= TOP_K_MAX:
        raise ValueError(f"top_k must be between {TOP_K_MIN} and {TOP_K_MAX}")
    return top_k


def chunks_search(
    *,
    query: str,
    top_k: int = TOP_K_DEFAULT,
    mode: Mode = "hybrid",
    document_ids: Sequence[int] | None = None,
    query_vector: np.ndarray | None = None,
) -> SearchResult:
    """Rank the knowledge base's chunks for `query`.

    `query_vector` (unit length, 384 floats), when given, is used instead of embedding the
    query. Raises ValueError for a bad top_k or mode.
    """
    validate_top_k(top_k)
    if mode not in MODES:
        raise ValueError(f"mode must be one of: {', '.join(MODES)}")
    truncated = False
    if query_vector is None:
        query_vector, truncated = embedding.embed_query(query)
    depth = candidate_depth(top_k)

    vector_hits: list[tuple[int, float]] = []
    lexical_hits: list[tuple[int, float]] = []
    if mode in ("hybrid", "vector"):
        vector_hits = chunks_search_vector(
            query_vector=query_vector, limit=depth, document_ids=document_ids
        )
    if mode in ("hybrid", "lexical"):
        lexical_hits = chunks_search_lexical(question=query, limit=depth, document_ids=document_ids)

    vector_ranking = [chunk_id for chunk_id, _ in vector_hits]
    lexical_ranking = [chunk_id for chunk_id, _ in lexical_hits]
    fused = reciprocal_rank_fusion([r for r in (vector_ranking, lexical_ranking) if r])[:top_k]
    if not fused:
        return SearchResult(chunks=[], query_vector=query_vector, truncated=truncated)

    similarity = dict(vector_hits)
    missing = [chunk_id for chunk_id, _ in fused if chunk_id not in similarity]
    similarity.update(similarities_for(missing, query_vector))
    vector_rank = {chunk_id: rank for rank, chunk_id in enumerate(vector_ranking, start=1)}
    lexical_rank = {chunk_id: rank for rank, chunk_id in enumerate(lexical_ranking, start=1)}

    chunks = Chunk.objects.select_related("document").in_bulk([cid for cid, _ in fused])
    results = []
    for chunk_id, score in fused:
        chunk = chunks[chunk_id]
        results.append(
            RetrievedChunk(
                chunk_id=chunk.id,
                document_id=chunk.document_id,
                document_title=chunk.document.title,
                document_url=chunk.document.url,
                chunk_index=chunk.index,
                page=chunk.page,
                section=chunk.section,
                text=chunk.text,
                excerpt=excerpt_of(chunk.text),
                similarity=similarity.get(chunk_id),
                score=score,
                vector_rank=vector_rank.get(chunk_id),
                lexical_rank=lexical_rank.get(chunk_id),
            )
        )
    return SearchResult(chunks=results, query_vector=query_vector, truncated=truncated)
