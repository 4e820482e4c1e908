"""The vector side of retrieval: the k-NN on the question's embedding over the rows a reader may
search, through the HNSW index (iterative scan) or, for a reader of at most EXACT_SEARCH_MAX_ROWS
embeddings (counted once and kept a short while: `searchable_rows_count`), exactly, row by row on a
shortlist by the vectors' signs (docs/decisions/0077-the-collection-on-every-searched-row.md); and
the cosine similarity of given chunks to the question."""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from django.db import connection
from django.db.models import Q

from knowledge import embedding
from knowledge.access import Reader, rows_searchable_sql
from knowledge.models import Embedding
from knowledge.sql_arrays import bigint_array

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


def candidate_depth(top_k: int) -> int:
    return max(4 * top_k, 40)


def vector_search_sql(
    *,
    query_vector: np.ndarray | str,
    limit: int,
    reader: Reader,
    document_ids: Sequence[int] | None = None,
    exact: bool = False,
    rows: int = 0,
) -> tuple[str, list]:
    """The k-NN query, yielding (chunk id, cosine distance) rows, nearest first, as SQL and its
    parameters (written out, not built with the ORM: it runs for every question,
    docs/decisions/0152-statements-written-out.md). `query_vector`: the vector, or its text
    (`vector_text`).

    By default `ORDER BY vector <=> q LIMIT limit`, the shape the HNSW index serves; it must
    run under the HNSW scan settings: `chunks_search_vector` sends them in the same query
    string; `vector_search_settings()` sets them for the rest of a transaction (to EXPLAIN the
    query as it runs). `exact`: the distance is ordered as an expression the index cannot
    serve (the plan for a reader who may search few rows, `exact_search_suits`): the rows that
    pass the filters are shortlisted by the Hamming distance of their vectors' signs to the
    query's, read from the `embedding_collection_bits` index alone, and the
    `exact_shortlist_size(limit, rows)` nearest of them (ties by chunk id) are compared in full,
    `rows` being how many the reader may search (`searchable_rows_count`). When no more rows
    than that pass the filters, every one is compared. The rows are those `reader` may search
    (`knowledge.access.rows_searchable_sql`), of the current embedding model, and of
    `document_ids` when given.
    """
    vector = query_vector if isinstance(query_vector, str) else vector_text(query_vector)
    table = Embedding._meta.db_table
    model = embedding.model_version()
    alias = "V0" if exact else table
    searchable, params = rows_searchable_sql(reader=reader, alias=alias)
    where = f"{searchable} AND {alias}.model = %s"
    params.append(model)
    if document_ids is not None:
        where += f" AND {alias}.document_id = ANY(%s::bigint[])"
        params.append(bigint_array(sorted(int(pk) for pk in document_ids)))
    limit = int(limit)
    if not exact:
        sql = (
            f"SELECT {table}.chunk_id, ({table}.vector <=> %s::vector) AS distance "
            f"FROM {table} WHERE {where} ORDER BY 2 ASC LIMIT {limit}"
        )
        return sql, [vector, *params]
    # `= ANY(ARRAY(shortlist))`: the shortlist runs once, and the rows compared in full are
    # read through one index scan of them all rather than a join probing row by row. `+ 0.0`:
    # the distance as an expression the HNSW index cannot serve.
    # The question's signs are quantised by the database, as each row's `vector_bits` is.
    dimensions = vector.count(",") + 1
    shortlist = (
        f"SELECT V0.chunk_id FROM {table} V0 WHERE {where} "
        f"ORDER BY (V0.vector_bits <~> binary_quantize(%s::vector)::bit({dimensions})) ASC, "
        f"1 ASC LIMIT {exact_shortlist_size(limit, rows)}"
    )
    sql = (
        f"SELECT {table}.chunk_id, (({table}.vector <=> %s::vector) + 0.0) AS distance "
        f"FROM {table} WHERE {table}.chunk_id = ANY(ARRAY({shortlist})) "
        f"AND {table}.model = %s ORDER BY 2 ASC LIMIT {limit}"
    )
    return sql, [vector, *params, vector, model]


def vector_text(vector: np.ndarray) -> str:
    """`vector` as pgvector's text form, `[x,y,…]` (once per question: both queries that need
    the question's vector take it as text). pgvector keeps float32 values: each is written
    with 9 significant digits, which always read back as the same float32."""
    values = np.asarray(vector, dtype=np.float32).tolist()
    return "[" + _values_format(len(values)) % tuple(values) + "]"


@lru_cache(maxsize=4)
def _values_format(count: int) -> str:
    return ",".join(["%.9g"] * count)


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
    query_vector: np.ndarray | str,
    limit: int,
    reader: Reader,
    document_ids: Sequence[int] | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) best first, among the rows `reader` may search.
    `query_vector`: the vector, or its text (`vector_text`).

    When those are few (`searchable_rows_count`), they are compared row by row, those nearest
    by their vectors' signs in full (`vector_search_sql`): cheaper than an index scan
    that must pass over the many rows the reader may not search. Otherwise
    through the HNSW index, which applies WHERE filters after the index scan, so a filter could
    starve the result; pgvector's iterative scan keeps scanning until `limit` rows pass the
    filters. Both settings are SET LOCAL in the same query string as the k-NN query:
    PostgreSQL runs a string of several statements as one transaction (an implicit block,
    where SET LOCAL holds), so they never leak to a pooled connection, and the search is one
    round trip instead of five (BEGIN, two SETs, the query, COMMIT). Inside a caller's
    transaction they last, as before, until that transaction ends.
    """
    if document_ids is not None and not document_ids:
        return []
    rows = searchable_rows_count(reader=reader, document_ids=document_ids)
    exact = rows is not None
    sql, params = vector_search_sql(
        query_vector=query_vector,
        limit=limit,
        reader=reader,
        document_ids=document_ids,
        exact=exact,
        rows=rows or 0,
    )
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


def similarities_for(chunk_ids: Sequence[int], query_vector: np.ndarray | str) -> dict[int, float]:
    """Cosine similarity of the question to each given chunk that has a current embedding
    (for lexical-only hits), in one query. `query_vector`: the vector, or its text."""
    if not chunk_ids:
        return {}
    vector = query_vector if isinstance(query_vector, str) else vector_text(query_vector)
    table = Embedding._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT chunk_id, vector <=> %s::vector FROM {table} "
            "WHERE chunk_id = ANY(%s::bigint[]) AND model = %s",
            [vector, bigint_array(sorted(int(pk) for pk in chunk_ids)), embedding.model_version()],
        )
        rows = cursor.fetchall()
    return {chunk_id: 1.0 - float(distance) for chunk_id, distance in rows}
