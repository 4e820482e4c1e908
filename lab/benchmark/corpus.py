"""The knowledge base side of the benchmark: ingestion vs. the embedding model alone, the
synthetic large corpus, and retrieval latency.

The large corpus is synthetic: perturbed copies of the real chunks (text plus a number token,
embedding plus Gaussian noise of NOISE_SIGMA, renormalised), in synthetic documents
(`synthetic://bench/...`), written with COPY while the HNSW and GIN indexes are dropped and
rebuilt afterwards. Why, and what it inflates: docs/decisions/0059-bench-synthetic-large-corpus.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from knowledge import embedding
from knowledge.access import OPERATOR
from knowledge.models import Chunk, Document, Embedding
from knowledge.retrieval import chunks_search
from knowledge.selectors import sentence_vectors_stored
from knowledge.sentences import answerable_sentences, text_hash
from lab.evaluation.dataset import Dataset
from lab.evaluation.runner import dataset_ingest

SYNTHETIC_PREFIX = "synthetic://bench/"
NOISE_SIGMA = 0.01
RETRIEVAL_TOP_K = 5
_WRITE_BATCH = 5000  # synthetic chunks per COPY round
_SEED = 20260101
# Indexes that make row-by-row maintenance slow; dropped during the bulk load, rebuilt after.
_BULK_INDEXES = (
    ("knowledge_embedding", "embedding_vector_hnsw"),
    ("knowledge_chunk", "chunk_search_vector_gin"),
)
# maintenance_work_mem for rebuilding the indexes: the HNSW graph is built much faster when it
# fits (about 2 kB a chunk at 384 dimensions, m=16); at least 512 MB, at most 4 GB.
_INDEX_BUILD_MEMORY_MIN_MB, _INDEX_BUILD_MEMORY_MAX_MB = 512, 4096
_INDEX_BUILD_KB_PER_CHUNK = 2.5

Progress = Callable[[int], None]


# --- Ingestion -------------------------------------------------------------------------------
@dataclass(frozen=True)
class IngestFigures:
    documents: int
    chunks: int
    seconds: float  # the real ingestion code, files to searchable chunks
    raw_seconds: float  # embed_texts alone on the same chunk texts
    sentences: int = 0  # distinct answerable sentences of the chunks (embedded too)
    raw_all_seconds: float = 0.0  # embed_texts alone on the chunk texts and their sentences

    @property
    def chunks_per_s(self) -> float:
        return self.chunks / self.seconds if self.seconds else 0.0

    @property
    def raw_chunks_per_s(self) -> float:
        return self.chunks / self.raw_seconds if self.raw_seconds else 0.0

    @property
    def ratio(self) -> float:
        return self.chunks_per_s / self.raw_chunks_per_s if self.raw_chunks_per_s else 0.0

    @property
    def ratio_all(self) -> float:
        """Ingestion against the model alone on everything ingestion embeds."""
        return self.raw_all_seconds / self.seconds if self.seconds else 0.0


def ingest_measure(dataset: Dataset) -> IngestFigures:
    """Ingest the dataset's documents (written out as files) through the real ingestion code
    into the current, empty knowledge base, then embed the very chunk texts it stored with the
    model alone. The model is loaded before either clock starts."""
    embedding.embed_texts(["warm-up"])
    documents, chunks, seconds = dataset_ingest(dataset)
    rows = list(Chunk.objects.order_by("pk").values_list("text", "sheet"))
    texts = [text for text, _ in rows]
    started = time.perf_counter()
    embedding.embed_texts(texts, batch_size=settings.EMBEDDING_BATCH_SIZE)
    raw_seconds = time.perf_counter() - started
    sentences = list(
        dict.fromkeys(
            sentence
            for text, sheet in rows
            for sentence in answerable_sentences(text, sheet=bool(sheet))
        )
    )
    started = time.perf_counter()
    embedding.embed_texts(texts + sentences, batch_size=settings.EMBEDDING_BATCH_SIZE)
    raw_all_seconds = time.perf_counter() - started
    return IngestFigures(
        documents=documents,
        chunks=len(texts),
        seconds=seconds,
        raw_seconds=raw_seconds,
        sentences=len(sentences),
        raw_all_seconds=raw_all_seconds,
    )


# --- The synthetic corpus --------------------------------------------------------------------
@dataclass(frozen=True)
class _Original:
    document_id: int
    document_title: str
    index: int
    text: str
    page: int | None
    section: str | None
    char_start: int
    char_end: int
    token_count: int
    vector: np.ndarray
    # When the appended number joins the chunk's last answerable sentence: that sentence's
    # text (the number goes after it) and its stored vector.
    last_sentence: tuple[str, np.ndarray] | None = None


@dataclass(frozen=True)
class GrowFigures:
    chunks: int  # the corpus size reached
    real: int
    synthetic: int  # synthetic chunks in the corpus
    added: int  # synthetic chunks added by this step
    load_seconds: float  # COPY of documents, chunks and embeddings
    index_seconds: float  # rebuilding the HNSW and GIN indexes, ANALYZE


class SyntheticCorpus:
    """Grows the current knowledge base to a given number of chunks with perturbed copies of
    its real chunks. Deterministic: the same real corpus and sizes give the same rows."""

    def __init__(self) -> None:
        model = embedding.model_version()
        vectors = dict(Embedding.objects.filter(model=model).values_list("chunk_id", "vector"))
        rows = (
            Chunk.objects.exclude(document__source__startswith=SYNTHETIC_PREFIX)
            .filter(pk__in=list(vectors))
            .select_related("document")
            .order_by("document_id", "index")
        )
        self.originals = [
            _Original(
                document_id=c.document_id,
                document_title=c.document.title,
                index=c.index,
                text=c.text,
                page=c.page,
                section=c.section,
                char_start=c.char_start,
                char_end=c.char_end,
                token_count=c.token_count,
                vector=np.asarray(vectors[c.pk], dtype=np.float32),
                last_sentence=_last_sentence(c.text, sheet=False),  # copies have no sheet
            )
            for c in rows
        ]
        stored = sentence_vectors_stored(
            text_hashes={text_hash(o.last_sentence[0]) for o in self.originals if o.last_sentence}
        )
        self.originals = [
            replace(
                o,
                last_sentence=(o.last_sentence[0], stored[text_hash(o.last_sentence[0])])
                if o.last_sentence and text_hash(o.last_sentence[0]) in stored
                else None,
            )
            for o in self.originals
        ]
        if not self.originals:
            raise ValueError("The knowledge base has no embedded chunks to copy.")
        self.synthetic = Chunk.objects.filter(document__source__startswith=SYNTHETIC_PREFIX).count()
        self.rng = np.random.default_rng(_SEED)

    @property
    def real(self) -> int:
        return len(self.originals)

    @property
    def size(self) -> int:
        return self.real + self.synthetic

    def grow_to(self, target: int, *, progress: Progress | None = None) -> GrowFigures:
        """Add synthetic chunks until the corpus holds `target` chunks (none if it already
        does). `progress(n)` after each batch of n chunks."""
        need = max(0, target - self.size)
        if not need:
            return GrowFigures(self.size, self.real, self.synthetic, 0, 0.0, 0.0)
        started = time.perf_counter()
        # Not restored on failure: the run stops, and the throwaway database goes with it.
        definitions = _indexes_drop()
        done = 0
        while done < need:
            count = min(_WRITE_BATCH, need - done)
            self._write(self.synthetic, count)
            self.synthetic += count
            done += count
            if progress:
                progress(count)
        loaded = time.perf_counter()
        _indexes_create(definitions, chunks=self.size)
        # What autovacuum does within a minute of such a load on a live server (the visibility
        # map, the statistics), done now rather than while the answers are measured, where the
        # PostgreSQL CPU it costs would be counted against the questions
        # (docs/decisions/0152-statements-written-out.md). VACUUM cannot run inside a
        # transaction: then ANALYZE only.
        command = "ANALYZE" if connection.in_atomic_block else "VACUUM ANALYZE"
        with connection.cursor() as cursor:
            for table in ("knowledge_document", "knowledge_chunk", "knowledge_embedding"):
                cursor.execute(f"{command} {table}")
        finished = time.perf_counter()
        return GrowFigures(
            chunks=self.size,
            real=self.real,
            synthetic=self.synthetic,
            added=need,
            load_seconds=loaded - started,
            index_seconds=finished - loaded,
        )

    def _write(self, first: int, count: int) -> None:
        """Synthetic chunks number `first` .. `first + count - 1` (copy k of original i is
        number k * real + i), with their documents, in one transaction."""
        serials = range(first, first + count)
        picks = [
            (serial // self.real + 1, self.originals[serial % self.real]) for serial in serials
        ]
        with transaction.atomic():
            documents = self._documents_for({(copy, o.document_id) for copy, o in picks}, picks)
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT nextval(pg_get_serial_sequence('knowledge_chunk', 'id')) "
                    "FROM generate_series(1, %s)",
                    [count],
                )
                chunk_ids = [row[0] for row in cursor.fetchall()]
            base = np.stack([o.vector for _, o in picks])
            noisy = base + self.rng.normal(0.0, NOISE_SIGMA, size=base.shape).astype(np.float32)
            noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
            _copy_chunks(
                [
                    (
                        chunk_id,
                        documents[(copy, o.document_id)],
                        o.index,
                        f"{o.text} {serial + 1}",
                        o.page,
                        o.section,
                        o.char_start,
                        o.char_end,
                        o.token_count,
                    )
                    for chunk_id, serial, (copy, o) in zip(chunk_ids, serials, picks, strict=True)
                ]
            )
            _copy_embeddings(chunk_ids, noisy, embedding.model_version())
            extended = [
                (f"{o.last_sentence[0]} {serial + 1}", o.last_sentence[1])
                for serial, (_, o) in zip(serials, picks, strict=True)
                if o.last_sentence
            ]
            if extended:
                base = np.stack([vector for _, vector in extended])
                noise = self.rng.normal(0.0, NOISE_SIGMA, size=base.shape).astype(np.float32)
                noisy = base + noise
                noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
                _copy_sentence_vectors(
                    [text_hash(text) for text, _ in extended], noisy, embedding.model_version()
                )

    def _documents_for(
        self, keys: set[tuple[int, int]], picks: Sequence[tuple[int, _Original]]
    ) -> dict[tuple[int, int], int]:
        """{(copy, original document id): synthetic document id}, created when missing."""
        sources = {key: f"{SYNTHETIC_PREFIX}{key[0]}/{key[1]}" for key in keys}
        existing = dict(
            Document.objects.filter(source__in=sources.values()).values_list("source", "pk")
        )
        titles = {o.document_id: o.document_title for _, o in picks}
        Document.objects.bulk_create(
            [
                Document(
                    title=f"{titles[key[1]]} (synthetic copy {key[0]})"[:300],
                    source=source,
                    media_type="text/markdown",
                    status=Document.Status.READY,
                    enabled=True,
                )
                for key, source in sorted(sources.items())
                if source not in existing
            ]
        )
        ids = dict(Document.objects.filter(source__in=sources.values()).values_list("source", "pk"))
        return {key: ids[source] for key, source in sources.items()}


def _copy_chunks(rows: list[tuple]) -> None:
    columns = (
        "id, document_id, index, text, page, section, char_start, char_end, token_count, text_hash"
    )
    with (
        connection.cursor() as cursor,
        cursor.copy(f"COPY knowledge_chunk ({columns}) FROM STDIN") as copy,
    ):
        for row in rows:
            copy.write_row((*row, text_hash(row[3])))


def _copy_embeddings(chunk_ids: list[int], vectors: np.ndarray, model: str) -> None:
    _copy_vectors("knowledge_embedding (chunk_id, vector, model)", chunk_ids, vectors, model)


def _copy_vectors(target: str, keys: list, vectors: np.ndarray, model: str) -> None:
    """COPY rows (key, vector, model) into `target` ("table (key column, vector, model)")."""
    row_format = "[" + ",".join(["%.7g"] * vectors.shape[1]) + "]"
    with connection.cursor() as cursor, cursor.copy(f"COPY {target} FROM STDIN") as copy:
        for key, vector in zip(keys, vectors.tolist(), strict=True):
            copy.write_row((key, row_format % tuple(vector), model))


_NUMBER_PROBE = 987654  # any number: each is one digit token joining the same way


def _last_sentence(text: str, *, sheet: bool) -> tuple[str, None] | None:
    """The original's last answerable sentence when a synthetic copy (the text with a number
    appended) changes exactly that sentence by appending the number to it; None when the copy's
    sentences are the original's (the number stands alone, too short to be quoted)."""
    before = answerable_sentences(text, sheet=sheet)
    after = answerable_sentences(f"{text} {_NUMBER_PROBE}", sheet=sheet)
    if after == before or not before or after[:-1] != before[:-1]:
        return None
    if after[-1] != f"{before[-1]} {_NUMBER_PROBE}":
        return None
    return before[-1], None


def _copy_sentence_vectors(hashes: list[str], vectors: np.ndarray, model: str) -> None:
    _copy_vectors("knowledge_sentencevector (text_hash, vector, model)", hashes, vectors, model)


def _indexes_drop() -> list[str]:
    """Drop the bulk-load indexes; their definitions, to create them again."""
    definitions = []
    with connection.cursor() as cursor:
        for table, name in _BULK_INDEXES:
            cursor.execute(
                "SELECT indexdef FROM pg_indexes WHERE tablename = %s AND indexname = %s",
                [table, name],
            )
            row = cursor.fetchone()
            if row:
                definitions.append(row[0])
                cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
    return definitions


@contextmanager
def bulk_indexes_rebuilt(*, chunks: int) -> Iterator[None]:
    """Drop the HNSW and full-text indexes for a bulk write to the corpus's rows (every row
    updated would otherwise be inserted into the graph again), and build them after it."""
    definitions = _indexes_drop()
    try:
        yield
    finally:
        _indexes_create(definitions, chunks=chunks)


def index_build_memory_mb(chunks: int) -> int:
    wanted = int(chunks * _INDEX_BUILD_KB_PER_CHUNK / 1024)
    return max(_INDEX_BUILD_MEMORY_MIN_MB, min(_INDEX_BUILD_MEMORY_MAX_MB, wanted))


def _indexes_create(definitions: list[str], *, chunks: int) -> None:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SET LOCAL maintenance_work_mem = '{index_build_memory_mb(chunks)}MB'")
        for definition in definitions:
            cursor.execute(definition)


# --- Retrieval -------------------------------------------------------------------------------
# What is timed per question: (mode, whether the query vector is given). The first two are the
# figures asked for; vector-only and lexical-only tell which side of the hybrid costs what.
RETRIEVAL_VARIANTS = {
    "hybrid": ("hybrid", True),
    "hybrid_with_embedding": ("hybrid", False),
    "vector_only": ("vector", True),
    "lexical_only": ("lexical", True),
}


def retrieval_measure(
    questions: Sequence[str], vectors: np.ndarray, *, progress: Progress | None = None
) -> dict[str, list[float]]:
    """Time chunks_search (top_k 5) for each question in each of RETRIEVAL_VARIANTS, after a
    few unmeasured warm-up searches; {variant: [ms per question]}. The order of the variants
    rotates from one question to the next, so that none always finds the pages the previous
    one read already cached."""
    pairs = list(zip(questions, vectors, strict=True))
    for question, vector in pairs[:3]:
        chunks_search(query=question, reader=OPERATOR, top_k=RETRIEVAL_TOP_K, query_vector=vector)
        chunks_search(query=question, reader=OPERATOR, top_k=RETRIEVAL_TOP_K)
    names = list(RETRIEVAL_VARIANTS)
    timings: dict[str, list[float]] = {name: [] for name in names}
    for i, (question, vector) in enumerate(pairs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            mode, given = RETRIEVAL_VARIANTS[name]
            started = time.perf_counter()
            chunks_search(
                query=question,
                reader=OPERATOR,
                top_k=RETRIEVAL_TOP_K,
                mode=mode,
                query_vector=vector if given else None,
            )
            timings[name].append((time.perf_counter() - started) * 1000)
        if progress:
            progress(1)
    return timings


def question_vectors(questions: Sequence[str]) -> np.ndarray:
    """The questions' query vectors, as chunks_search would compute them."""
    if not questions:
        return np.zeros((0, embedding.DIMENSIONS), dtype=np.float32)
    return np.stack([embedding.embed_query(question)[0] for question in questions])
