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
"""

from __future__ import annotations

import datetime as dt
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

import numpy as np
from django.contrib.postgres.expressions import ArraySubquery
from django.contrib.postgres.search import SearchQuery
from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import BooleanField, F, FloatField, Func, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.db.models.functions import Cast
from django.utils import timezone
from pgvector.django import BitField, CosineDistance, HammingDistance

from knowledge import embedding
from knowledge.access import Reader, document_is_personal, documents_readable_filter
from knowledge.models import Chunk, Document, Embedding
from knowledge.personal import personal_file_label
from knowledge.vocabulary import Vocabulary, text_search_parse, vocabulary_get

Mode = Literal["hybrid", "vector", "lexical"]
MODES: tuple[str, ...] = ("hybrid", "vector", "lexical")
TOP_K_MIN, TOP_K_MAX, TOP_K_DEFAULT = 1, 20, 5
EXCERPT_CHARS = 200
# Lexical candidates: the chunks holding the question's rarest terms, as many terms as hold
# together at most this many chunks (the cost of the lexical side grows with it).
LEXICAL_CANDIDATE_BUDGET = 1000
# A reader who may search at most this many embeddings is searched exactly, row by row, not
# through the HNSW index (docs/decisions/0077-the-collection-on-every-searched-row.md).
EXACT_SEARCH_MAX_ROWS = 20_000
# The row-by-row search compares in full only the rows nearest by their vectors' signs: this
# many times `limit`, or this share of the rows searched if more
# (docs/decisions/0078-a-shortlist-on-the-vectors-signs.md).
EXACT_SHORTLIST_FACTOR = 10
EXACT_SHORTLIST_SHARE = 0.05
# How long a process trusts a count of the rows a reader may search (it chooses the plan and
# the shortlist's size, never which rows pass the read rule), and how many counts it keeps.
ROWS_COUNT_SECONDS = 60.0
ROWS_COUNT_ENTRIES = 512
# Reciprocal rank fusion's constant (docs/product.md §4), for a follow-up's preferred documents.
RRF_K = 60
# Score fusion: cosine similarity + LEXICAL_WEIGHT × lexical score / best candidate's lexical score.
LEXICAL_WEIGHT = 0.5
# Scores within this share of each other are a tie that the more recent document wins.
RECENCY_MARGIN = 0.001
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


def not_expired(prefix: str = "") -> Q:
    """Documents (through `prefix`, e.g. "chunk__document__") without an expiry in the past."""
    return Q(**{f"{prefix}expires_at__isnull": True}) | Q(
        **{f"{prefix}expires_at__gt": timezone.now()}
    )


def reader_required(reader: object) -> Reader:
    """`reader` when it is a `Reader`; TypeError otherwise (a user, None: a search must be told
    whose it is, and never defaults to everything)."""
    if not isinstance(reader, Reader):
        raise TypeError(f"reader must be a knowledge.access.Reader, not {type(reader).__name__}")
    return reader


def _searchable(*, reader: Reader, prefix: str = "") -> Q:
    """Documents (through `prefix`) that are searched for `reader`: those they may read that
    are available (enabled, ready and not expired; withdrawn ones are never searched, even for
    those who may read them). Through a prefix (chunks, embeddings), the collection is tested
    on the row's own copy, so the k-NN and full-text scans drop unreadable rows before they
    reach the document (docs/decisions/0077-the-collection-on-every-searched-row.md)."""
    reader_required(reader)
    return documents_readable_filter(
        user=reader,
        prefix=prefix,
        collection_field="collection_id" if prefix else None,
        searching=True,
    )


def searchable_documents(*, reader: Reader) -> QuerySet[Document]:
    """The documents whose chunks are searched for `reader` (`searchable_chunks`)."""
    return Document.objects.filter(_searchable(reader=reader))


def searchable_chunks(
    *, reader: Reader, document_ids: Iterable[int] | None = None, searchable: Q | None = None
) -> QuerySet[Chunk]:
    """Chunks of the documents searched for `reader` (optionally only of the given
    documents). `searchable`: the rows' filter for `reader` already built by the caller
    (`rows_searchable_filter`, once per search)."""
    if searchable is None:
        searchable = rows_searchable_filter(reader=reader)
    queryset = Chunk.objects.filter(searchable)
    if document_ids is not None:
        queryset = queryset.filter(document_id__in=list(document_ids))
    return queryset


def rows_searchable_filter(*, reader: Reader) -> Q:
    """The filter on chunks and embeddings (their own collection and document columns) of the
    rows searched for `reader`: built once per search and passed to its queries."""
    return _searchable(reader=reader, prefix="document__")


def knowledge_base_is_empty(*, reader: Reader) -> bool:
    """Whether nothing is searched for `reader`: for someone who may read only some
    collections, empty when those are, whatever the others hold."""
    return not searchable_chunks(reader=reader).exists()


def candidate_depth(top_k: int) -> int:
    return max(4 * top_k, 40)


def vector_search_queryset(
    *,
    query_vector: np.ndarray,
    limit: int,
    reader: Reader,
    document_ids: Sequence[int] | None = None,
    exact: bool = False,
    rows: int = 0,
    searchable: Q | None = None,
) -> QuerySet[Embedding]:
    """The k-NN query, yielding (chunk id, cosine distance) rows, nearest first.

    By default `ORDER BY vector <=> q LIMIT limit`, the shape the HNSW index serves; it must
    run under the HNSW scan settings: `chunks_search_vector` sends them in the same query
    string; `vector_search_settings()` sets them for the rest of a transaction (to EXPLAIN the
    query as it runs). `exact`: the distance is ordered as an expression the index cannot
    serve (the plan for a reader who may search few rows, `exact_search_suits`): the rows that
    pass the filters are shortlisted by the Hamming distance of their vectors' signs to the
    query's, read from the `embedding_collection_bits` index alone, and the
    `exact_shortlist_size(limit, rows)` nearest of them (ties by chunk id) are compared in full,
    `rows` being how many the reader may search (`searchable_rows_count`). When no more rows
    than that pass the filters, every one is compared. `searchable`: as for `searchable_chunks`.
    """
    if searchable is None:
        searchable = rows_searchable_filter(reader=reader)
    queryset = Embedding.objects.filter(searchable, model=embedding.model_version())
    if document_ids is not None:
        queryset = queryset.filter(document_id__in=list(document_ids))
    distance = CosineDistance("vector", query_vector.tolist())
    if exact:
        shortlist = (
            queryset.annotate(bits_distance=HammingDistance("vector_bits", _signs(query_vector)))
            .order_by("bits_distance", "chunk_id")
            .values("chunk_id")[: exact_shortlist_size(limit, rows)]
        )
        # `= ANY(ARRAY(shortlist))`: the shortlist runs once, and the rows compared in full are
        # read through one index scan of them all rather than a join probing row by row.
        among_shortlist = Func(
            F("chunk_id"),
            ArraySubquery(shortlist),
            arg_joiner=" = ANY(",
            template="%(expressions)s)",
            output_field=BooleanField(),
        )
        queryset = Embedding.objects.filter(among_shortlist, model=embedding.model_version())
        distance = distance + Value(0.0, output_field=FloatField())
    return (
        queryset.annotate(distance=distance)
        .order_by("distance")
        .values_list("chunk_id", "distance")[:limit]
    )


def _signs(vector: np.ndarray) -> Cast:
    """`vector`'s signs as the database's `binary_quantize` writes them: 1 where positive."""
    bits = "".join("1" if value > 0 else "0" for value in vector.tolist())
    return Cast(Value(bits), BitField(length=len(bits)))


def exact_shortlist_size(limit: int, rows: int) -> int:
    """How many rows the row-by-row k-NN compares in full, of `rows` it may search for
    `limit` results: EXACT_SHORTLIST_FACTOR × `limit`, or EXACT_SHORTLIST_SHARE of `rows` if
    more."""
    return max(EXACT_SHORTLIST_FACTOR * limit, math.ceil(EXACT_SHORTLIST_SHARE * rows))


def exact_search_suits(*, reader: Reader, document_ids: Sequence[int] | None = None) -> bool:
    """Whether the k-NN for `reader` is cheaper compared row by row than through the HNSW
    index: when the rows they may search (`searchable_rows_count`) are at most
    EXACT_SEARCH_MAX_ROWS. Never for a reader of every collection (docs/decisions/0077-…)."""
    return searchable_rows_count(reader=reader, document_ids=document_ids) is not None


def searchable_rows_count(
    *, reader: Reader, document_ids: Sequence[int] | None = None
) -> int | None:
    """How many embeddings `reader` may search (their collections' and searched files', or
    those of `document_ids`), of every embedding model: an upper bound, counted on the
    collection and document indexes alone; None when more than EXACT_SEARCH_MAX_ROWS, or for a
    reader of every collection. A count is kept in the process for ROWS_COUNT_SECONDS per
    database, collections, searched files and `document_ids` (`searchable_rows_forget`)."""
    if document_ids is None and reader.is_superuser:
        return None
    key = (
        connection.settings_dict["NAME"],
        reader.is_superuser,
        frozenset(reader.collection_ids),
        frozenset(reader.searched_file_ids),
        None if document_ids is None else frozenset(document_ids),
        EXACT_SEARCH_MAX_ROWS,
    )
    now = time.monotonic()
    with _rows_counts_lock:
        cached = _rows_counts.get(key)
    if cached is not None and now - cached[0] < ROWS_COUNT_SECONDS:
        count = cached[1]
    else:
        count = _searchable_rows_counted(reader=reader, document_ids=document_ids)
        with _rows_counts_lock:
            _rows_counts[key] = (now, count)
            _rows_counts.move_to_end(key)
            while len(_rows_counts) > ROWS_COUNT_ENTRIES:
                _rows_counts.popitem(last=False)
    return count if count <= EXACT_SEARCH_MAX_ROWS else None


_rows_counts_lock = threading.Lock()
_rows_counts: OrderedDict[tuple, tuple[float, int]] = OrderedDict()


def searchable_rows_forget() -> None:
    """Drop the process's counts of searchable rows (tests: each has its own knowledge base)."""
    with _rows_counts_lock:
        _rows_counts.clear()


def _searchable_rows_counted(*, reader: Reader, document_ids: Sequence[int] | None) -> int:
    """`searchable_rows_count` read from the database, at most EXACT_SEARCH_MAX_ROWS + 1."""
    rows = Embedding.objects.all()
    if not reader.is_superuser:
        rows = rows.filter(
            Q(collection_id__in=sorted(reader.collection_ids))
            | Q(document_id__in=sorted(reader.searched_file_ids))
        )
    if document_ids is not None:
        rows = rows.filter(document_id__in=list(document_ids))
    return rows[: EXACT_SEARCH_MAX_ROWS + 1].count()


def _vector_search_settings_sql(limit: int) -> str:
    # An int formatted in, not a bound parameter: SET does not take parameters when psycopg
    # binds on the server side.
    return (
        "SET LOCAL hnsw.iterative_scan = relaxed_order; "
        f"SET LOCAL hnsw.ef_search = {max(40, int(limit))}"
    )


def vector_search_settings(*, limit: int) -> None:
    """SET LOCAL the HNSW scan settings for the current transaction (must be inside one)."""
    with connection.cursor() as cursor:
        cursor.execute(_vector_search_settings_sql(limit))


def chunks_search_vector(
    *,
    query_vector: np.ndarray,
    limit: int,
    reader: Reader,
    document_ids: Sequence[int] | None = None,
    searchable: Q | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) best first, among the rows `reader` may search
    (`searchable`: their filter, when the caller built it: `rows_searchable_filter`).

    When those are few (`searchable_rows_count`), they are compared row by row, those nearest
    by their vectors' signs in full (`vector_search_queryset`): cheaper than an index scan
    that must pass over the many rows the reader may not search. Otherwise
    through the HNSW index, which applies WHERE filters after the index scan, so a filter could
    starve the result; pgvector's iterative scan keeps scanning until `limit` rows pass the
    filters. Both settings are SET LOCAL in the same query string as the k-NN query:
    PostgreSQL runs a string of several statements as one transaction (an implicit block,
    where SET LOCAL holds), so they never leak to a pooled connection, and the search is one
    round trip instead of five (BEGIN, two SETs, the query, COMMIT). Inside a caller's
    transaction they last, as before, until that transaction ends.
    """
    rows = searchable_rows_count(reader=reader, document_ids=document_ids)
    exact = rows is not None
    queryset = vector_search_queryset(
        query_vector=query_vector,
        limit=limit,
        reader=reader,
        document_ids=document_ids,
        exact=exact,
        rows=rows or 0,
        searchable=searchable,
    )
    try:
        sql, params = queryset.query.sql_with_params()
    except EmptyResultSet:  # an empty document filter
        return []
    # Several statements in one string with parameters: psycopg's client-side binding cursor
    # (Django's default) sends them as one simple query. With the database option
    # `server_side_binding` on, PostgreSQL refuses several statements in one prepared query.
    with connection.cursor() as cursor:
        if exact:
            cursor.execute(sql, params)
        else:
            cursor.execute(f"{_vector_search_settings_sql(limit)}; {sql}", params)
            cursor.nextset()  # past the two SETs' empty results
            cursor.nextset()
        rows = cursor.fetchall()
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


def _websearch_items(question: str) -> tuple[list[str], list[str]]:
    """The top-level items of websearch_to_tsquery's parse: (wanted, excluded)."""
    parsed = text_search_parse(question).websearch
    # The top level of websearch's output is joined by " & " (phrases use <->, "or" gives |).
    items = list(dict.fromkeys(item for item in (parsed or "").split(" & ") if item))
    wanted = [item for item in items if not item.startswith("!")]
    excluded = [item for item in items if item.startswith("!")]
    return wanted, excluded


def lexical_query(
    question: str, *, reader: Reader, vocabulary: Vocabulary | None = None
) -> LexicalQuery | None:
    """The question's full-text terms weighted by the document frequencies of what `reader`
    may search (knowledge/vocabulary.py);
    None when it has no term to look for (only stop words or only exclusions).

    A phrase is held by at most as many chunks as its rarest word, an `or` group by at most
    the sum of its words' chunks; the weight is ln((N + 1) / (frequency + 0.5)) over the N
    searchable chunks (the vocabulary's idf).
    """
    wanted, excluded = _websearch_items(question)
    if not wanted:
        return None
    vocabulary = vocabulary or vocabulary_get(reader=reader)
    terms = []
    for item in wanted:
        frequencies = [
            vocabulary.frequency(lexeme.replace("''", "'")) for lexeme in _LEXEME.findall(item)
        ] or [0]
        frequency = sum(frequencies) if " | " in item else min(frequencies)
        terms.append(
            LexicalTerm(
                query=item, frequency=frequency, weight=vocabulary.idf_of_frequency(frequency)
            )
        )
    terms.sort(key=lambda term: (term.frequency, term.query))
    return LexicalQuery(terms=tuple(terms), excluded=tuple(excluded))


def chunks_search_lexical(
    *,
    question: str,
    limit: int,
    reader: Reader,
    document_ids: Sequence[int] | None = None,
    query: LexicalQuery | None = None,
    searchable: Q | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, lexical score) best first: the summed inverse document frequencies of the
    question's terms each chunk holds.

    The candidates are the chunks holding one of the question's rarest terms (as many terms,
    rarest first, as hold together at most LEXICAL_CANDIDATE_BUDGET chunks); every term counts
    in their score. A chunk holding only common words scores too little to matter, and
    leaving them out keeps the cost bounded on a large knowledge base. `searchable`: as for
    `searchable_chunks`.
    """
    reader_required(reader)
    query = query or lexical_query(question, reader=reader)
    if query is None:
        return []
    # The lexemes are already stemmed by the english parse; "simple" keeps them as they are
    # (re-parsing with "english" would drop stems that happen to be stop words: "other").
    score_sql, score_params = query.score_sql('"knowledge_chunk"."search_vector"')
    rows = (
        searchable_chunks(reader=reader, document_ids=document_ids, searchable=searchable)
        .filter(
            search_vector=SearchQuery(query.candidate_query(), config="simple", search_type="raw")
        )
        .annotate(rank=RawSQL(score_sql, score_params, output_field=FloatField()))
        .order_by("-rank", "id")
        .values_list("id", "rank")[:limit]
    )
    return [(chunk_id, float(rank)) for chunk_id, rank in rows]


def similarities_for(chunk_ids: Sequence[int], query_vector: np.ndarray) -> dict[int, float]:
    """Cosine similarity of the question to each given chunk that has a current embedding
    (for lexical-only hits), in one query."""
    if not chunk_ids:
        return {}
    rows = (
        Embedding.objects.filter(chunk_id__in=list(chunk_ids), model=embedding.model_version())
        .annotate(distance=CosineDistance("vector", query_vector.tolist()))
        .values_list("chunk_id", "distance")
    )
    return {chunk_id: 1.0 - float(distance) for chunk_id, distance in rows}


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[int]], *, k: int = RRF_K
) -> list[tuple[int, float]]:
    """Fuse ranked id lists: score = Σ 1/(k + rank); ties broken by id for determinism."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def scores_fuse(
    vector_hits: Sequence[tuple[int, float]],
    lexical_hits: Sequence[tuple[int, float]],
    similarity: dict[int, float],
) -> list[tuple[int, float]]:
    """Rank the candidates of both sides by cosine similarity (`similarity`, every candidate's)
    + LEXICAL_WEIGHT × lexical score relative to the best lexical candidate's (0 for a
    candidate the lexical side did not return); ties broken by id."""
    best_lexical = max((score for _, score in lexical_hits), default=0.0)
    scale = LEXICAL_WEIGHT / best_lexical if best_lexical > 0 else 0.0
    lexical = dict(lexical_hits)
    candidates = {cid for cid, _ in vector_hits} | set(lexical)
    scores = {cid: similarity.get(cid, 0.0) + scale * lexical.get(cid, 0.0) for cid in candidates}
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


def _preferred_ranking(rankings: Sequence[Sequence[int]], document_ids: Sequence[int]) -> list[int]:
    """The candidates of `rankings` that belong to `document_ids`, in fused order."""
    candidates = {cid for ranking in rankings for cid in ranking}
    preferred = set(
        Chunk.objects.filter(pk__in=candidates, document_id__in=list(document_ids)).values_list(
            "pk", flat=True
        )
    )
    return [cid for cid, _ in reciprocal_rank_fusion(rankings) if cid in preferred]


def _near(best: float, score: float) -> bool:
    return abs(best - score) <= RECENCY_MARGIN * max(abs(best), abs(score))


def _tie_runs(ranked: Sequence[tuple[int, float]], limit: int) -> list[tuple[int, int]]:
    """The runs of near-equal scores of `ranked` (within RECENCY_MARGIN of the run's best),
    as (begin, end) slices of two places or more, starting within the first `limit`."""
    runs: list[tuple[int, int]] = []
    start = 0
    while start < min(limit, len(ranked)):
        end = start + 1
        while end < len(ranked) and _near(ranked[start][1], ranked[end][1]):
            end += 1
        if end - start > 1:
            runs.append((start, end))
        start = end
    return runs


def _tied_ids(ranked: Sequence[tuple[int, float]], runs: Sequence[tuple[int, int]]) -> list[int]:
    return [ranked[i][0] for begin, end in runs for i in range(begin, end)]


def _days_read(chunk_ids: Iterable[int], days: dict[int, int]) -> None:
    """Add to `days` the day (an ordinal, UTC) each chunk's document was last updated, for
    those of `chunk_ids` not in it yet: one statement (raw SQL: it runs for most questions),
    none when all are known."""
    missing = sorted({chunk_id for chunk_id in chunk_ids if chunk_id not in days})
    if not missing:
        return
    with connection.cursor() as cursor:
        cursor.execute(_DAYS_SQL, [missing])
        rows = cursor.fetchall()
    days.update((pk, moment.astimezone(dt.UTC).date().toordinal()) for pk, moment in rows)


_DAYS_SQL = (
    f"SELECT c.id, d.updated_at FROM {Chunk._meta.db_table} c "
    f"JOIN {Document._meta.db_table} d ON d.id = c.document_id WHERE c.id = ANY(%s)"
)


def recency_tie_break(
    ranked: Sequence[tuple[int, float]], *, limit: int, days: dict[int, int] | None = None
) -> list[tuple[int, float]]:
    """`ranked` ((chunk id, score), best first) with each run of near-equal scores (within
    RECENCY_MARGIN of the run's best) ordered by the day its document was last updated, most
    recent first; the order is otherwise kept (a stable sort). Only runs starting within the
    first `limit` places are looked at (one query, only when there is such a run whose days
    are not known yet; `days` keeps the days found, chunk id → ordinal, across calls)."""
    runs = _tie_runs(ranked, limit)
    if not runs:
        return list(ranked)
    days = {} if days is None else days
    _days_read(_tied_ids(ranked, runs), days)
    result = list(ranked)
    for begin, end in runs:
        result[begin:end] = sorted(result[begin:end], key=lambda pair: -days.get(pair[0], 0))
    return result


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
) -> SearchResult:
    """Rank the chunks `reader` may read for `query` (the module docstring says which).

    `query_vector` (unit length, 384 floats), when given, is used instead of embedding the
    query. `prefer_document_ids` (hybrid mode): the documents a conversation is about (a
    follow-up question's); their candidates form a third ranking in the fusion, so they win
    when the other rankings place them close (chat/answering/followups.py). Raises ValueError
    for a bad top_k or mode.
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
    started = time.perf_counter()
    lexical = lexical_query(query, reader=reader) if mode in ("hybrid", "lexical") else None
    planned = time.perf_counter() - started  # the lexical side's: planning its query
    searchable = rows_searchable_filter(reader=reader)  # built once for both rankings
    if mode in ("hybrid", "vector"):
        vector_started = time.perf_counter()
        vector_hits = chunks_search_vector(
            query_vector=query_vector,
            limit=depth,
            reader=reader,
            document_ids=document_ids,
            searchable=searchable,
        )
        timed["vector_ms"] = round((time.perf_counter() - vector_started) * 1000, 1)
    if lexical is not None:
        lexical_started = time.perf_counter()
        lexical_hits = chunks_search_lexical(
            question=query,
            limit=depth,
            reader=reader,
            document_ids=document_ids,
            query=lexical,
            searchable=searchable,
        )
        timed["lexical_ms"] = round((time.perf_counter() - lexical_started + planned) * 1000, 1)

    # Each side settles its own ties first: two copies of a passage tie exactly on both sides,
    # and each side's order of them (by id) would otherwise decide the fused order.
    days: dict[int, int] = {}
    # The days of both sides' runs in one statement (the fused ranking's runs are nearly
    # always among them).
    _days_read(
        [
            *_tied_ids(vector_hits, _tie_runs(vector_hits, len(vector_hits))),
            *_tied_ids(lexical_hits, _tie_runs(lexical_hits, len(lexical_hits))),
        ],
        days,
    )
    vector_hits = recency_tie_break(vector_hits, limit=len(vector_hits), days=days)
    lexical_hits = recency_tie_break(lexical_hits, limit=len(lexical_hits), days=days)
    similarity = dict(vector_hits)
    if mode == "vector":
        ranked = vector_hits
    elif mode == "hybrid" and prefer_document_ids and (vector_hits or lexical_hits):
        # A follow-up: the documents its conversation is about form a third ranking.
        rankings = [[cid for cid, _ in hits] for hits in (vector_hits, lexical_hits) if hits]
        rankings.append(_preferred_ranking(rankings, prefer_document_ids))
        ranked = reciprocal_rank_fusion(rankings)
    elif mode == "hybrid":
        # Lexical-only candidates need their cosine to be fused (one query).
        lexical_only = [cid for cid, _ in lexical_hits if cid not in similarity]
        similarity.update(similarities_for(lexical_only, query_vector))
        ranked = scores_fuse(vector_hits, lexical_hits, similarity)
    else:
        ranked = lexical_hits
    fused = recency_tie_break(ranked, limit=top_k, days=days)[:top_k]
    # Lexical-only hits: their cosine similarity (the evidence check needs every chunk's).
    missing = [cid for cid, _ in fused if cid not in similarity]
    if missing:
        similarity.update(similarities_for(missing, query_vector))
    if not fused:
        return SearchResult(chunks=[], query_vector=query_vector, truncated=truncated, **timed)
    vector_rank = {cid: rank for rank, (cid, _) in enumerate(vector_hits, start=1)}
    lexical_rank = {cid: rank for rank, (cid, _) in enumerate(lexical_hits, start=1)}

    # The ranking queries and this read are separate statements: a document re-ingested in
    # between has replaced the chunks they found (new ids). Those are left out of this answer
    # rather than failing it; the next search finds the new chunks.
    chunks = Chunk.objects.select_related("document").in_bulk([cid for cid, _ in fused])
    results = []
    for chunk_id, score in fused:
        chunk = chunks.get(chunk_id)
        if chunk is None:
            continue
        results.append(
            RetrievedChunk(
                chunk_id=chunk.id,
                document_id=chunk.document_id,
                document_title=(
                    personal_file_label(chunk.document.title)
                    if document_is_personal(chunk.document)
                    else chunk.document.title
                ),
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
                sheet=chunk.sheet,
                cells=chunk.cells,
                ocr_confidence=chunk.ocr_confidence,
            )
        )
    return SearchResult(chunks=results, query_vector=query_vector, truncated=truncated, **timed)
