"""Stored vectors of chunks and sentences: looking up the ones the model already computed,
embedding the rest, writing sentence vectors, and pruning those no chunk holds any more.
Shared by ingestion (knowledge/services/ingest_window.py, document_write.py) and re-embedding
(knowledge/services/reindex.py)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from knowledge import embedding
from knowledge.models import Chunk, Embedding, SentenceVector
from knowledge.sentences import answerable_sentences
from knowledge.sentences import text_hash as sentence_hash

LOOKUP_BATCH = 1000  # text hashes per embedding-cache query
WRITE_BATCH = 500  # rows per INSERT
_PRUNE_BATCH = 200  # sentences looked up per full-text query when pruning their vectors

# Embeddings are cached by what the model read: the chunk text (by hash) and its section,
# whose heading path is part of the model's input (`chunking.embedding_input`).
VectorKey = tuple[str, str | None]


def vectors_known(keys: list[VectorKey]) -> dict[VectorKey, Any]:
    """Existing vectors, under the configured model, of chunks with these texts (by hash)
    and sections."""
    model = embedding.model_version()
    wanted = set(keys)
    hashes = list(dict.fromkeys(text_hash for text_hash, _ in keys))
    known: dict[VectorKey, Any] = {}
    for start in range(0, len(hashes), LOOKUP_BATCH):
        rows = (
            Embedding.objects.filter(
                model=model, chunk__text_hash__in=hashes[start : start + LOOKUP_BATCH]
            )
            .order_by()
            .values_list("chunk__text_hash", "chunk__section", "vector")
        )
        for text_hash, section, vector in rows:
            if (text_hash, section) in wanted:
                known.setdefault((text_hash, section), vector)
    return known


def texts_embed(missing: dict[Any, str]) -> dict[Any, Any]:
    """Vectors for the given model inputs, in one call of the model; a text given under
    several keys (a chunk without a heading that is also one answerable sentence) is embedded
    once and its vector given to each (docs/decisions/0085-personal-file-reading-time.md)."""
    if not missing:
        return {}
    texts = list(dict.fromkeys(missing.values()))
    vectors = embedding.embed_texts(texts, batch_size=settings.EMBEDDING_BATCH_SIZE)
    by_text = dict(zip(texts, vectors, strict=True))
    return {key: by_text[text] for key, text in missing.items()}


def sentences_missing(chunks: Iterable[tuple[str, bool]]) -> dict[str, str]:
    """hash → text of the answerable sentences of (text, is a sheet) chunks that have no
    stored vector under the configured model (each distinct text once)."""
    sentences = chunk_sentences(chunks)
    model = embedding.model_version()
    hashes = list(sentences)
    for start in range(0, len(hashes), LOOKUP_BATCH):
        stored = SentenceVector.objects.filter(
            model=model, text_hash__in=hashes[start : start + LOOKUP_BATCH]
        ).values_list("text_hash", flat=True)
        for text_hash in stored:
            sentences.pop(text_hash, None)
    return sentences


def sentence_vectors_write(vectors: dict[str, Any]) -> None:
    model = embedding.model_version()
    SentenceVector.objects.bulk_create(
        [SentenceVector(text_hash=key, vector=v, model=model) for key, v in vectors.items()],
        batch_size=WRITE_BATCH,
        ignore_conflicts=True,  # the same sentence written by another document meanwhile
    )


def chunk_sentences(rows: Iterable[tuple[str, bool]]) -> dict[str, str]:
    """hash → text of the answerable sentences of (chunk text, is a sheet) rows."""
    sentences: dict[str, str] = {}
    for text, sheet in rows:
        for sentence in answerable_sentences(text, sheet=sheet):
            sentences.setdefault(sentence_hash(sentence), sentence)
    return sentences


def sentence_vectors_prune(candidates: dict[str, str]) -> int:
    """Delete the stored vectors of the `candidates` (hash → text: the sentences of chunks
    just removed) that no remaining chunk holds any more; returns how many rows went.

    Cheap on any size of knowledge base: a chunk still holding a sentence holds all its words,
    so the full-text index finds the few chunks to look in (plainto_tsquery), and the text is
    looked for in those, stopping at the first. Errs on keeping: a candidate found inside
    another sentence of a chunk, or without a searchable word (only stop words), is kept."""
    hashes = list(candidates)
    held: set[str] = set()
    for start in range(0, len(hashes), _PRUNE_BATCH):
        batch = hashes[start : start + _PRUNE_BATCH]
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT c.h FROM unnest(%s::text[], %s::text[]) AS c(h, t) "
                "WHERE numnode(plainto_tsquery('english', c.t)) = 0 OR EXISTS ("
                " SELECT 1 FROM knowledge_chunk k"
                " WHERE k.search_vector @@ plainto_tsquery('english', c.t)"
                " AND strpos(k.text, c.t) > 0)",
                [batch, [candidates[key] for key in batch]],
            )
            held.update(key for (key,) in cursor.fetchall())
    orphans = [key for key in hashes if key not in held]
    deleted = 0
    for start in range(0, len(orphans), LOOKUP_BATCH):
        deleted += SentenceVector.objects.filter(
            text_hash__in=orphans[start : start + LOOKUP_BATCH]
        ).delete()[0]
    return deleted


def documents_sentences(document_ids: Iterable[int]) -> dict[str, str]:
    """hash → text of the answerable sentences of these documents' chunks."""
    rows = Chunk.objects.filter(document_id__in=list(document_ids)).values_list("text", "sheet")
    return chunk_sentences((text, bool(sheet)) for text, sheet in rows)


def document_sentences_prune_on_commit(document_ids: Iterable[int]) -> None:
    """Once the current transaction commits, prune the stored vectors of the sentences of
    these documents' chunks (read now, before they go) that no other chunk holds."""
    candidates = documents_sentences(document_ids)
    if candidates:
        # robust: a failed clean-up is logged; it never fails the deletion that committed.
        transaction.on_commit(lambda: sentence_vectors_prune(candidates), robust=True)
