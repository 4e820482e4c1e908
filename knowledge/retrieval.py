"""Hybrid retrieval: pgvector cosine k-NN + PostgreSQL full text, fused by score.

Only enabled documents in status `ready` are ever searched, optionally narrowed to a chosen set
of documents. Each side fetches a candidate list deeper than top_k:

- vector: the HNSW k-NN on the question's embedding;
- lexical: the question's terms (PostgreSQL's websearch parse, OR-ed) weighted by their inverse
  document frequency in the knowledge base (knowledge/vocabulary.py); a chunk scores the summed
  weights of the terms it holds. ts_rank has no notion of how common a word is ("how long is
  paternity leave" ranked the annual-leave chunk first); with IDF the rare word decides. Only
  chunks holding the question's rarest terms are candidates (LEXICAL_CANDIDATE_BUDGET), which
  bounds the cost on a large knowledge base.

Both candidate lists are measured on both sides (cosine similarity and lexical score, one
query) and ranked by similarity + LEXICAL_WEIGHT × lexical score / best lexical score; when
one side finds nothing the other stands alone.

Measured on squad2-visible (395 chunks, 400 answerable questions; halves by question document
in brackets): recall@1 0.883 (0.925 / 0.840), recall@5 0.980 (0.995 / 0.965), against 0.698 /
0.920 for the former ts_rank + reciprocal rank fusion (k = 60), 0.725 / 0.935 for the vector
side alone. Reciprocal rank fusion of the same two lists gives 0.815 / 0.980: ranks throw away
how far apart the scores are. LEXICAL_WEIGHT anywhere in 0.25..0.75 gives recall@1 0.868-0.885,
recall@5 0.975-0.983 (both halves within 0.02 of their best).

Cost at 100k chunks (bench's synthetic corpus, question vector given, 40 dataset questions,
interleaved with the former code in one process on a loaded 2-core machine): p50 49 ms, p95
182 ms, against 479 / 1013 ms; the lexical side examines about 500 chunks (p50) instead of
ranking every chunk holding any word of the question. `manage.py bench --chunks 100000
--concurrency 1 --questions 30`: hybrid 24 / 50 ms (vector side 9 / 15, lexical side 19 / 35).
The first search of a process builds the vocabulary (seconds at 100k chunks).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from django.contrib.postgres.search import SearchQuery
from django.db import connection, transaction
from django.db.models import FloatField, QuerySet
from django.db.models.expressions import RawSQL
from pgvector.django import CosineDistance

from knowledge import embedding
from knowledge.models import Chunk, Document, Embedding
from knowledge.vocabulary import Vocabulary, vocabulary_get

Mode = Literal["hybrid", "vector", "lexical"]
MODES: tuple[str, ...] = ("hybrid", "vector", "lexical")
TOP_K_MIN, TOP_K_MAX, TOP_K_DEFAULT = 1, 20, 5
EXCERPT_CHARS = 200
# Lexical candidates: the chunks holding the question's rarest terms, as many terms as hold
# together at most this many chunks (the cost of the lexical side grows with it).
LEXICAL_CANDIDATE_BUDGET = 1000
# Fusion: cosine similarity + LEXICAL_WEIGHT × lexical score / best candidate's lexical score.
LEXICAL_WEIGHT = 0.5
_LEXEME = re.compile(r"'((?:[^']|'')*)'")


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


@dataclass(frozen=True)
class LexicalTerm:
    """One top-level item of the question's full-text query: a lexeme, a quoted phrase or an
    `or` group, as raw tsquery text."""

    query: str
    frequency: int  # searchable chunks holding it (an upper bound for phrases and groups)
    weight: float  # its inverse document frequency


@dataclass(frozen=True)
class LexicalQuery:
    terms: tuple[LexicalTerm, ...]  # rarest first
    excluded: tuple[str, ...]  # `-word` items, raw tsquery text starting with "!"

    def candidate_query(self, budget: int | None = None) -> str:
        """The rarest terms, as many as hold together at most `budget` chunks (default
        LEXICAL_CANDIDATE_BUDGET; always at least one term), OR-ed; exclusions AND-ed."""
        budget = LEXICAL_CANDIDATE_BUDGET if budget is None else budget
        chosen, total = [], 0
        for term in self.terms:
            if chosen and total + term.frequency > budget:
                break
            chosen.append(term.query)
            total += term.frequency
        return _with_exclusions(" | ".join(chosen), self.excluded)

    def score_sql(self, column: str) -> tuple[str, list]:
        """SQL for a chunk's lexical score (the summed weights of the terms its `column`
        matches; 0 when it holds an excluded term) and its parameters."""
        parts = " + ".join(
            f"({column} @@ to_tsquery('simple', %s))::int * %s::float8" for _ in self.terms
        )
        params: list = [value for term in self.terms for value in (term.query, term.weight)]
        if not self.excluded:
            return f"({parts})", params
        sql = f"(CASE WHEN {column} @@ to_tsquery('simple', %s) THEN {parts} ELSE 0 END)"
        return sql, [" & ".join(self.excluded), *params]


def _with_exclusions(text: str, excluded: Sequence[str]) -> str:
    return f"({text}) & " + " & ".join(excluded) if excluded else text


def lexical_query_text(question: str) -> str:
    """PostgreSQL's websearch parse of the question with its terms OR-ed together.

    websearch_to_tsquery AND-s every term, so a natural-language question rarely matches
    anything whole; OR-ing the same lexemes lets partial matches count. Quoted phrases keep
    their phrase operator; excluded terms (`-word`) stay AND-ed (`(a | b) & !c`). Empty when
    the question has only stop words or only exclusions.
    """
    wanted, excluded = _websearch_items(question)
    return _with_exclusions(" | ".join(wanted), excluded) if wanted else ""


def _websearch_items(question: str) -> tuple[list[str], list[str]]:
    """The top-level items of websearch_to_tsquery's parse: (wanted, excluded)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT websearch_to_tsquery('english', %s)::text", [question])
        (parsed,) = cursor.fetchone()
    # The top level of websearch's output is joined by " & " (phrases use <->, "or" gives |).
    items = list(dict.fromkeys(item for item in (parsed or "").split(" & ") if item))
    wanted = [item for item in items if not item.startswith("!")]
    excluded = [item for item in items if item.startswith("!")]
    return wanted, excluded


def lexical_query(question: str, vocabulary: Vocabulary | None = None) -> LexicalQuery | None:
    """The question's full-text terms weighted by the knowledge base's document frequencies;
    None when it has no term to look for (only stop words or only exclusions).

    A phrase is held by at most as many chunks as its rarest word, an `or` group by at most
    the sum of its words' chunks; the weight is ln((N + 1) / (frequency + 0.5)) over the N
    searchable chunks (the vocabulary's idf).
    """
    wanted, excluded = _websearch_items(question)
    if not wanted:
        return None
    vocabulary = vocabulary or vocabulary_get()
    terms = []
    for item in wanted:
        frequencies = [
            vocabulary.frequency(lexeme.replace("''", "'")) for lexeme in _LEXEME.findall(item)
        ] or [0]
        frequency = sum(frequencies) if " | " in item else min(frequencies)
        weight = math.log((vocabulary.chunk_count + 1) / (frequency + 0.5))
        terms.append(LexicalTerm(query=item, frequency=frequency, weight=weight))
    terms.sort(key=lambda term: (term.frequency, term.query))
    return LexicalQuery(terms=tuple(terms), excluded=tuple(excluded))


def chunks_search_lexical(
    *,
    question: str,
    limit: int,
    document_ids: Sequence[int] | None = None,
    query: LexicalQuery | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, lexical score) best first: the summed inverse document frequencies of the
    question's terms each chunk holds.

    The candidates are the chunks holding one of the question's rarest terms (as many terms,
    rarest first, as hold together at most LEXICAL_CANDIDATE_BUDGET chunks); every term counts
    in their score. A chunk holding only common words scores too little to matter, and
    leaving them out keeps the cost bounded on a large knowledge base.
    """
    query = query or lexical_query(question)
    if query is None:
        return []
    # The lexemes are already stemmed by the english parse; "simple" keeps them as they are
    # (re-parsing with "english" would drop stems that happen to be stop words: "other").
    score_sql, score_params = query.score_sql('"knowledge_chunk"."search_vector"')
    rows = (
        searchable_chunks(document_ids)
        .filter(
            search_vector=SearchQuery(query.candidate_query(), config="simple", search_type="raw")
        )
        .annotate(rank=RawSQL(score_sql, score_params, output_field=FloatField()))
        .order_by("-rank", "id")
        .values_list("id", "rank")[:limit]
    )
    return [(chunk_id, float(rank)) for chunk_id, rank in rows]


def candidates_measure(
    chunk_ids: Sequence[int], *, query_vector: np.ndarray, query: LexicalQuery | None
) -> dict[int, tuple[float | None, float]]:
    """{chunk id: (cosine similarity or None without a current embedding, lexical score)} for
    the given chunks, in one query."""
    if not chunk_ids:
        return {}
    score_sql, score_params = query.score_sql("c.search_vector") if query else ("0.0", [])
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT c.id, 1 - (e.vector <=> %s::vector), {score_sql} "
            "FROM knowledge_chunk c LEFT JOIN knowledge_embedding e "
            "ON e.chunk_id = c.id AND e.model = %s WHERE c.id = ANY(%s)",
            [
                "[" + ",".join(map(str, query_vector.tolist())) + "]",
                *score_params,
                embedding.model_version(),
                list(chunk_ids),
            ],
        )
        rows = cursor.fetchall()
    return {
        chunk_id: (None if similarity is None else float(similarity), float(lexical))
        for chunk_id, similarity, lexical in rows
    }


def scores_fuse(measures: dict[int, tuple[float | None, float]]) -> list[tuple[int, float]]:
    """Rank candidates by cosine similarity + LEXICAL_WEIGHT × lexical score relative to the
    best candidate's; ties broken by id for determinism. Without any lexical match this is the
    cosine order, without embeddings the lexical order."""
    best_lexical = max((lexical for _, lexical in measures.values()), default=0.0)
    scale = LEXICAL_WEIGHT / best_lexical if best_lexical > 0 else 0.0
    scores = {
        chunk_id: (similarity or 0.0) + scale * lexical
        for chunk_id, (similarity, lexical) in measures.items()
    }
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


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
    lexical = lexical_query(query) if mode in ("hybrid", "lexical") else None
    if mode in ("hybrid", "vector"):
        vector_hits = chunks_search_vector(
            query_vector=query_vector, limit=depth, document_ids=document_ids
        )
    if lexical is not None:
        lexical_hits = chunks_search_lexical(
            question=query, limit=depth, document_ids=document_ids, query=lexical
        )

    if mode == "vector":
        fused = vector_hits[:top_k]
        similarity = dict(fused)
    else:
        candidates = list(dict.fromkeys(cid for cid, _ in [*vector_hits, *lexical_hits]))
        measures = candidates_measure(candidates, query_vector=query_vector, query=lexical)
        similarity = {cid: measure[0] for cid, measure in measures.items()}
        fused = scores_fuse(measures)[:top_k] if mode == "hybrid" else lexical_hits[:top_k]
    if not fused:
        return SearchResult(chunks=[], query_vector=query_vector, truncated=truncated)
    vector_rank = {cid: rank for rank, (cid, _) in enumerate(vector_hits, start=1)}
    lexical_rank = {cid: rank for rank, (cid, _) in enumerate(lexical_hits, start=1)}

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
