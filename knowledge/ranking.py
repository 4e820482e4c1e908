"""How retrieval's rankings are combined and ordered: score fusion (cosine + LEXICAL_WEIGHT x the
relative lexical score), reciprocal rank fusion (a follow-up's conversation documents as a
third ranking), and the recency tie-break of near-equal scores
(docs/decisions/0002-retrieval-score-fusion.md)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.db import connection

from knowledge.models import Chunk, Document
from knowledge.sql_arrays import bigint_array

# Reciprocal rank fusion's constant (docs/product.md §4), for a follow-up's preferred documents.
RRF_K = 60
# Score fusion: cosine similarity + LEXICAL_WEIGHT × lexical score / best candidate's lexical score.
LEXICAL_WEIGHT = 0.5
# Scores within this share of each other are a tie that the more recent document wins.
RECENCY_MARGIN = 0.001


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


def preferred_ranking(rankings: Sequence[Sequence[int]], document_ids: Sequence[int]) -> list[int]:
    """The candidates of `rankings` that belong to `document_ids`, in fused order."""
    candidates = sorted({cid for ranking in rankings for cid in ranking})
    with connection.cursor() as cursor:  # written out: it runs for every follow-up (0152)
        cursor.execute(
            _PREFERRED_SQL,
            [bigint_array(candidates), bigint_array(sorted(int(pk) for pk in document_ids))],
        )
        preferred = {pk for (pk,) in cursor.fetchall()}
    return [cid for cid, _ in reciprocal_rank_fusion(rankings) if cid in preferred]


_PREFERRED_SQL = (
    f"SELECT id FROM {Chunk._meta.db_table} "  # noqa: S608
    "WHERE id = ANY(%s::bigint[]) AND document_id = ANY(%s::bigint[])"
)


def _near(best: float, score: float) -> bool:
    return abs(best - score) <= RECENCY_MARGIN * max(abs(best), abs(score))


def tie_runs(ranked: Sequence[tuple[int, float]], limit: int) -> list[tuple[int, int]]:
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


def tied_ids(ranked: Sequence[tuple[int, float]], runs: Sequence[tuple[int, int]]) -> list[int]:
    return [ranked[i][0] for begin, end in runs for i in range(begin, end)]


def days_read(chunk_ids: Iterable[int], days: dict[int, int]) -> None:
    """Add to `days` the day (an ordinal, UTC) each chunk's document was last updated, for
    those of `chunk_ids` not in it yet: one statement (raw SQL: it runs for most questions),
    none when all are known."""
    missing = sorted({chunk_id for chunk_id in chunk_ids if chunk_id not in days})
    if not missing:
        return
    with connection.cursor() as cursor:
        cursor.execute(_DAYS_SQL, [bigint_array(missing)])
        days.update(cursor.fetchall())


# The day of the chunk row `c`'s document: the ordinal computed by the database (Python's
# `date.toordinal`: 0001-01-01 is day 1), an integer per row instead of a timestamp with its time
# zone parsed in Python. A subquery per row, not a join: the planner hashed every document of the
# library to join a few dozen chunks (docs/decisions/0174-a-chunk-s-day-looked-up.md).
CHUNK_DAY_SQL = (
    "(SELECT (d.updated_at AT TIME ZONE 'UTC')::date - DATE '0001-01-01' + 1 "
    f"FROM {Document._meta.db_table} d WHERE d.id = c.document_id)"
)
_DAYS_SQL = (
    f"SELECT c.id, {CHUNK_DAY_SQL} FROM {Chunk._meta.db_table} c WHERE c.id = ANY(%s::bigint[])"
)


def recency_tie_break(
    ranked: Sequence[tuple[int, float]], *, limit: int, days: dict[int, int] | None = None
) -> list[tuple[int, float]]:
    """`ranked` ((chunk id, score), best first) with each run of near-equal scores (within
    RECENCY_MARGIN of the run's best) ordered by the day its document was last updated, most
    recent first; the order is otherwise kept (a stable sort). Only runs starting within the
    first `limit` places are looked at (one query, only when there is such a run whose days
    are not known yet; `days` keeps the days found, chunk id → ordinal, across calls)."""
    runs = tie_runs(ranked, limit)
    if not runs:
        return list(ranked)
    days = {} if days is None else days
    days_read(tied_ids(ranked, runs), days)
    result = list(ranked)
    for begin, end in runs:
        result[begin:end] = sorted(result[begin:end], key=lambda pair: -days.get(pair[0], 0))
    return result
