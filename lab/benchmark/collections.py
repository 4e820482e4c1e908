"""The collections case of `manage.py bench`: the corpus spread over COLLECTIONS collections,
each readable by a group of its own, and a user in the groups of READABLE of them. Hybrid
retrieval is timed for that user and unrestricted (the operator) on the same questions, in
turns, and recall@5 of that user's answerable questions (those whose document lies in a
collection they may read) is compared between the two: the read rule is applied inside both
sides' SQL before ranking, so the user's top 5 must hold the answer as often as the
unrestricted top 5 does (no starved top-k). Figures: docs/decisions/0075-retrieval-for-a-reader.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection

from knowledge import embedding
from knowledge.access import OPERATOR, Reader, reader_for
from knowledge.collections import collection_create
from knowledge.models import Chunk, Document
from knowledge.retrieval import chunks_search
from knowledge.vector_search import searchable_rows_forget
from knowledge.vocabulary import vocabulary_get
from lab.benchmark.corpus import RETRIEVAL_TOP_K, SYNTHETIC_PREFIX, bulk_indexes_rebuilt
from lab.benchmark.stats import latency_summary
from lab.evaluation.dataset import Dataset, contains_gold

COLLECTIONS = 20
READABLE = 3
RECALL_DEPTH = 5
WARM_UP_QUESTIONS = 3

Progress = Callable[[int], None]


def collections_spread(count: int = COLLECTIONS) -> list[int]:
    """COLLECTIONS restricted collections (`bench-0` …), each readable by a group of the same
    name, every document moved into one: real documents in turn by id, synthetic copies by
    id. Returns the collections' ids in order."""
    ids = []
    for number in range(count):
        group = Group.objects.create(name=f"bench-{number}")
        ids.append(collection_create(name=f"bench-{number}", groups=[group]).pk)
    real = list(
        Document.objects.exclude(source__startswith=SYNTHETIC_PREFIX)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    # The database moves each document's chunks and embeddings with it (migration 0007).
    with bulk_indexes_rebuilt(chunks=Chunk.objects.count()), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE knowledge_document SET collection_id = (%s::bigint[])[1 + id %% %s]",
            [ids, count],
        )
        for position, pk in enumerate(real):
            cursor.execute(
                "UPDATE knowledge_document SET collection_id = %s WHERE id = %s",
                [ids[position % count], pk],
            )
    # What autovacuum does within a minute of such a write on a live server: the moved rows'
    # old versions cleared, the visibility map and the planner's statistics brought up to date
    # (VACUUM cannot run inside a transaction: then ANALYZE only).
    command = "ANALYZE" if connection.in_atomic_block else "VACUUM ANALYZE"
    with connection.cursor() as cursor:
        for table in ("knowledge_document", "knowledge_chunk", "knowledge_embedding"):
            cursor.execute(f"{command} {table}")
    return ids


def reader_of_some(collection_ids: Sequence[int], readable: int = READABLE) -> Reader:
    """A staff user in the groups of the first `readable` collections, and their `Reader`."""
    user = get_user_model().objects.create_user(
        username="bench-collections-reader", password=None, is_staff=True
    )
    user.groups.add(*Group.objects.filter(readable_collections__in=collection_ids[:readable]))
    return reader_for(user)


def _questions_of(dataset: Dataset, reader: Reader) -> list[tuple[str, tuple[str, ...]]]:
    """The dataset's answerable questions whose document `reader` may read: (question, answers)."""
    from lab.evaluation.runner import documents_by_dataset_id

    by_dataset = documents_by_dataset_id(dataset)
    readable_ids = set(
        Document.objects.filter(collection_id__in=reader.collection_ids).values_list(
            "pk", flat=True
        )
    )
    return [
        (q.question, q.answers)
        for q in dataset.questions
        if q.expect == "answer"
        and q.document
        and q.follows is None
        and set(by_dataset.get(q.document, [])) & readable_ids
    ]


def _search(question: str, vector: np.ndarray, reader: Reader, mode: str = "hybrid") -> list[str]:
    result = chunks_search(
        query=question, reader=reader, top_k=RETRIEVAL_TOP_K, query_vector=vector, mode=mode
    )
    return [chunk.text for chunk in result.chunks]


def collections_measure(
    dataset: Dataset, sample: Sequence[str], vectors: np.ndarray, *, progress: Progress | None
) -> dict[str, Any]:
    """Spread the current corpus over COLLECTIONS collections, then time hybrid retrieval
    (top_k RETRIEVAL_TOP_K, the query vector given) for the reader of READABLE of them and
    unrestricted, in turns, on `sample`; and recall@5 of the reader's own questions both
    ways. Times in ms."""
    collection_ids = collections_spread()
    reader = reader_of_some(collection_ids)
    vocabulary_get(reader=reader, wait=True)  # built once, as a server's first question would
    vocabulary_get(reader=OPERATOR, wait=True)
    pairs = list(zip(sample, vectors, strict=True))
    for question, vector in pairs[:WARM_UP_QUESTIONS]:
        _search(question, vector, reader)
        _search(question, vector, OPERATOR)
    runs = [
        (f"{who_name}{suffix}", who, mode)
        for mode, suffix in (("hybrid", ""), ("vector", "_vector"), ("lexical", "_lexical"))
        for who_name, who in (("restricted", reader), ("unrestricted", OPERATOR))
    ]
    # The reader's search when it is their first in ROWS_COUNT_SECONDS: the count of their
    # rows read again.
    runs.append(("restricted_first", reader, "hybrid"))
    timings: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    for i, (question, vector) in enumerate(pairs):
        # Rotated from one question to the next, so that none always runs on pages the
        # previous one just read.
        for name, who, mode in runs[i % len(runs) :] + runs[: i % len(runs)]:
            if name == "restricted_first":
                searchable_rows_forget()
            started = time.perf_counter()
            _search(question, vector, who, mode)
            timings[name].append((time.perf_counter() - started) * 1000)
        if progress:
            progress(1)

    own = _questions_of(dataset, reader)
    own_vectors = embedding.embed_texts([q for q, _ in own]) if own else np.zeros((0, 1))
    hits = {"restricted": 0, "unrestricted": 0}
    full = 0
    for (question, answers), vector in zip(own, own_vectors, strict=True):
        texts = _search(question, vector, reader)
        full += len(texts) == RETRIEVAL_TOP_K
        hits["restricted"] += any(contains_gold(t, answers) for t in texts[:RECALL_DEPTH])
        texts = _search(question, vector, OPERATOR)
        hits["unrestricted"] += any(contains_gold(t, answers) for t in texts[:RECALL_DEPTH])
    summaries = {name: latency_summary(values) for name, values in timings.items()}
    return {
        "collections": COLLECTIONS,
        "readable": READABLE,
        "reader_chunks": _chunks_of(reader),
        "questions": len(pairs),
        "p50_restricted": summaries["restricted"]["p50"],
        "p95_restricted": summaries["restricted"]["p95"],
        "p50_unrestricted": summaries["unrestricted"]["p50"],
        "p95_unrestricted": summaries["unrestricted"]["p95"],
        "p95_ratio": _p95_ratio(summaries, "restricted"),
        "p50_restricted_first": summaries["restricted_first"]["p50"],
        "p95_restricted_first": summaries["restricted_first"]["p95"],
        "p95_ratio_first": _p95_ratio(summaries, "restricted_first"),
        "p50_restricted_vector": summaries["restricted_vector"]["p50"],
        "p95_restricted_vector": summaries["restricted_vector"]["p95"],
        "p50_unrestricted_vector": summaries["unrestricted_vector"]["p50"],
        "p95_unrestricted_vector": summaries["unrestricted_vector"]["p95"],
        "p50_restricted_lexical": summaries["restricted_lexical"]["p50"],
        "p95_restricted_lexical": summaries["restricted_lexical"]["p95"],
        "p50_unrestricted_lexical": summaries["unrestricted_lexical"]["p50"],
        "p95_unrestricted_lexical": summaries["unrestricted_lexical"]["p95"],
        "own_questions": len(own),
        "own_full_top_k": full,
        "recall_at_5_restricted": round(hits["restricted"] / len(own), 3) if own else None,
        "recall_at_5_unrestricted": round(hits["unrestricted"] / len(own), 3) if own else None,
    }


def _p95_ratio(summaries: dict[str, dict[str, float]], name: str) -> float | None:
    """The p95 of run `name` over the unrestricted run's, to 3 decimals (None if that is 0)."""
    unrestricted = summaries["unrestricted"]["p95"]
    return round(summaries[name]["p95"] / unrestricted, 3) if unrestricted else None


def _chunks_of(reader: Reader) -> int:
    from knowledge.search_scope import searchable_chunks

    return searchable_chunks(reader=reader).count()
