"""Re-embedding after the model changed: every chunk and every answerable sentence without a
vector under the configured model gets one, and vectors of other models go. (Re-chunking
documents cut by another chunker is `documents_reindex`, knowledge/services/ingest.py.)"""

from __future__ import annotations

from django.db import transaction

from knowledge import embedding
from knowledge.chunking import embedding_input
from knowledge.models import Chunk, Embedding, SentenceVector
from knowledge.selectors import embeddings_stale
from knowledge.services.ingest_window import Progress
from knowledge.services.vectors import (
    WRITE_BATCH,
    sentence_vectors_write,
    sentences_missing,
    texts_embed,
    vectors_known,
)

_STALE_BATCH = 256  # chunks per re-embedding round


def embeddings_rebuild_stale(*, progress: Progress | None = None) -> int:
    """Embed every chunk that has no embedding under the configured model (texts already
    embedded elsewhere are copied), drop its embeddings from other models. Batches ordered
    by pk, each in its own transaction. Returns the number of chunks brought up to date;
    `progress(n)` after each batch of n chunks."""
    model = embedding.model_version()
    done = 0
    last_pk = 0
    while True:
        batch = list(
            embeddings_stale()
            .filter(pk__gt=last_pk)
            .order_by("pk")
            .values_list("pk", "text", "text_hash", "section")[:_STALE_BATCH]
        )
        if not batch:
            return done
        last_pk = batch[-1][0]
        known = vectors_known([(text_hash, section) for _, _, text_hash, section in batch])
        known.update(
            texts_embed(
                {
                    (text_hash, section): embedding_input(text=text, section=section)
                    for _, text, text_hash, section in batch
                    if (text_hash, section) not in known
                }
            )
        )
        chunk_ids = [pk for pk, *_ in batch]
        with transaction.atomic():
            Embedding.objects.filter(chunk_id__in=chunk_ids).exclude(model=model).delete()
            Embedding.objects.bulk_create(
                [
                    Embedding(chunk_id=pk, vector=known[(text_hash, section)], model=model)
                    for pk, _, text_hash, section in batch
                ],
                batch_size=WRITE_BATCH,
                ignore_conflicts=True,  # another process fixed the same chunk meanwhile
            )
        done += len(batch)
        if progress:
            progress(len(batch))


def sentence_vectors_rebuild_stale(*, progress: Progress | None = None) -> int:
    """Embed the answerable sentences of every chunk that have no stored vector under the
    configured model, then drop the sentence vectors of other models. Chunks in batches
    ordered by pk; `progress(n)` after each batch of n chunks. Returns the sentences embedded."""
    done = 0
    last_pk = 0
    while True:
        batch = list(
            Chunk.objects.filter(pk__gt=last_pk)
            .order_by("pk")
            .values_list("pk", "text", "sheet")[:_STALE_BATCH]
        )
        if not batch:
            break
        last_pk = batch[-1][0]
        missing = sentences_missing([(text, bool(sheet)) for _, text, sheet in batch])
        sentence_vectors_write(texts_embed(missing))
        done += len(missing)
        if progress:
            progress(len(batch))
    SentenceVector.objects.exclude(model=embedding.model_version()).delete()
    return done
