"""A processed document written: its new chunks and embeddings swapped in one transaction, or
its failure recorded on it.

The swap keeps the chunks whose text and section did not change (same rows, so the answers
citing them still point at them) and replaces only the others; readers see the old version
until the new one is complete, and a failure leaves no half-written chunks behind
(docs/decisions/0091-unchanged-chunks-keep-their-rows.md).

A document that existed when its processing started is written back by its id: if it was
deleted meanwhile (by an admin, or by `purge_expired`), nothing is written and the outcome
says so (`IngestOutcome.deleted`); it is never re-created from its `source`. Fields filled
only when the document has none (the title) are decided inside the swap transaction, so a
title an admin set meanwhile stays (docs/decisions/0090-a-document-written-back-by-its-id.md).

Used by ingestion (knowledge/services/ingest.py, through knowledge/services/ingest_window.py)
and by the lifecycle's failure records (knowledge/services/lifecycle.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F

from knowledge import embedding
from knowledge.chunking import CHUNKER_VERSION, ChunkDraft
from knowledge.models import Chunk, Document, Embedding
from knowledge.services.vectors import (
    WRITE_BATCH,
    VectorKey,
    chunk_sentences,
    documents_sentences,
    sentence_vectors_prune,
    sentence_vectors_write,
)
from knowledge.signals import knowledge_changed_send

logger = logging.getLogger(__name__)

Action = Literal["new", "updated", "unchanged", "failed"]

DELETED_MEANWHILE = "The document was deleted while it was being processed; nothing was written."


@dataclass
class IngestOutcome:
    source: str
    action: Action
    document: Document | None
    chunks: int
    error: str = ""
    # The document was deleted while it was being processed (action "failed", nothing written).
    deleted: bool = False


@dataclass
class IngestJob:
    """A parsed and chunked document waiting for its embeddings, then for its write."""

    source: str
    action: Action
    existing: Document | None  # the document as it was when its processing started
    content_hash: str
    drafts: list[ChunkDraft]
    fields: dict  # Document fields to set when written
    failure_fields: dict  # fields for a document created only to record a failure
    # Fields set only where the document, read inside the swap transaction, has none (title).
    blank_fields: dict = field(default_factory=dict)
    # What the parser found (a spreadsheet's sheets), merged over the document's own metadata
    # inside the swap transaction.
    metadata: dict = field(default_factory=dict)
    known: dict[VectorKey, Any] = field(default_factory=dict)  # → vector
    missing: dict[VectorKey, str] = field(default_factory=dict)  # → what the model must embed
    # The chunks' answerable sentences not stored yet under the model: hash → text, then
    # hash → vector once embedded (knowledge.sentences; read back when answering).
    sentences_missing: dict[str, str] = field(default_factory=dict)
    sentence_vectors: dict[str, Any] = field(default_factory=dict)
    error: str = ""


def deleted_outcome(source: str, document_id: int) -> IngestOutcome:
    logger.warning(
        "Document %s (%s) was deleted while it was being processed; nothing was written.",
        document_id,
        source,
    )
    return IngestOutcome(source, "failed", None, 0, DELETED_MEANWHILE, deleted=True)


def job_write(job: IngestJob) -> IngestOutcome:
    """Write one embedded job (or record its failure) and say what happened."""
    document_id = job.existing.pk if job.existing is not None else None
    if job.error:
        document = document_mark_failed(
            document_id=document_id, source=job.source, error=job.error, fields=job.failure_fields
        )
        if document is None:
            return deleted_outcome(job.source, document_id)
        return IngestOutcome(job.source, "failed", document, 0, job.error)
    try:
        document = _write(job)
    except IntegrityError as exc:
        logger.warning("Concurrent ingestion of %s: %s", job.source, exc)
        error = "The document was changed by another ingestion at the same time; try again."
        return IngestOutcome(job.source, "failed", job.existing, 0, error)
    except DatabaseError as exc:  # rolled back: the previous version is still complete
        logger.exception("Saving %s failed", job.source)
        error = f"Could not save the document: {exc}"
        return IngestOutcome(job.source, "failed", job.existing, 0, error)
    if document is None:
        return deleted_outcome(job.source, document_id)
    return IngestOutcome(job.source, job.action, document, len(job.drafts))


def _write(job: IngestJob) -> Document | None:
    """Swap in the new chunks and embeddings, and mark the document ready, atomically.
    None, and nothing written, when the document the job was made from no longer exists."""
    with transaction.atomic():
        document = _document_for_update(job.existing.pk if job.existing else None, job.source)
        if document is None:
            return None
        for name, value in job.fields.items():
            setattr(document, name, value)
        for name, value in job.blank_fields.items():
            if not getattr(document, name):
                setattr(document, name, value)
        if job.metadata:  # the document's own (its url and the like) stay
            document.metadata = {**(document.metadata or {}), **job.metadata}
        document.content_hash = job.content_hash
        document.chunker_version = CHUNKER_VERSION
        document.status = Document.Status.READY
        document.error = ""
        document.reprocessing_since = None
        document.save()
        # The vectors of the old chunks' sentences that no chunk holds any more go.
        removed = documents_sentences([document.pk])
        _chunks_swap(document, drafts=job.drafts, vectors=job.known)
        sentence_vectors_write(job.sentence_vectors)
        if removed:
            kept = chunk_sentences((draft.text, bool(draft.sheet)) for draft in job.drafts)
            sentence_vectors_prune({k: t for k, t in removed.items() if k not in kept})
    knowledge_changed_send()
    return document


def _document_for_update(document_id: int | None, source: str) -> Document | None:
    """The document to write, locked (`select_for_update`; the caller holds a transaction):
    by id when it existed when its processing started (None if deleted since), else by
    `source`, a new unsaved one when there is none."""
    documents = Document.objects.select_for_update()
    if document_id is not None:
        return documents.filter(pk=document_id).first()
    return documents.filter(source=source).first() or Document(source=source)


def _chunk_fields(draft: ChunkDraft) -> dict:
    """A chunk's columns taken from its draft (those of a new chunk and of a kept one)."""
    return {
        "index": draft.index,
        "text": draft.text,
        "page": draft.page,
        "section": draft.section,
        "char_start": draft.char_start,
        "char_end": draft.char_end,
        "token_count": draft.token_count,
        "text_hash": draft.text_hash,
        "sheet": draft.sheet,
        "cells": draft.cells,
        "ocr_confidence": draft.ocr_confidence,
    }


# What may differ between a kept chunk and its draft (text and section are what matched them).
_KEPT_CHUNK_COLUMNS = (
    "index",
    "page",
    "char_start",
    "char_end",
    "token_count",
    "sheet",
    "cells",
    "ocr_confidence",
)


def _chunks_swap(
    document: Document, *, drafts: list[ChunkDraft], vectors: dict[VectorKey, Any]
) -> None:
    """Make the document's chunks those of `drafts`, embedded with `vectors` ((text hash,
    section) → vector) under the current model. An old chunk with the same text and section
    as a draft is kept (same row: citations of it stay attached and fresh) and takes the
    draft's position, page and cells (written only when they differ); the other old chunks go
    (their embeddings with them; citations keep their snapshot), and the other drafts become
    new chunks. The caller holds the transaction and the document's row lock
    (docs/decisions/0091-unchanged-chunks-keep-their-rows.md)."""
    model = embedding.model_version()
    pool: dict[VectorKey, list[Chunk]] = {}
    top = 0  # the highest index in use
    old = Chunk.objects.filter(document=document).only("text_hash", "section", *_KEPT_CHUNK_COLUMNS)
    for chunk in old.order_by("index"):
        pool.setdefault((chunk.text_hash, chunk.section), []).append(chunk)
        top = max(top, chunk.index)
    kept: list[Chunk] = []
    changed: list[Chunk] = []
    new: list[ChunkDraft] = []
    for draft in drafts:
        same = pool.get((draft.text_hash, draft.section))
        if not same:
            new.append(draft)
            continue
        chunk = same.pop(0)
        kept.append(chunk)
        fields = _chunk_fields(draft)
        if any(getattr(chunk, name) != fields[name] for name in _KEPT_CHUNK_COLUMNS):
            for name in _KEPT_CHUNK_COLUMNS:
                setattr(chunk, name, fields[name])
            changed.append(chunk)
    gone = [chunk.pk for chunks in pool.values() for chunk in chunks]
    if gone:
        Embedding.objects.filter(chunk_id__in=gone).delete()
        Chunk.objects.filter(pk__in=gone).only("pk").delete()
    if changed:
        # Out of the way first: (document, index) is unique, checked row by row. A kept chunk
        # left alone already sits at its draft's index, which no other draft has.
        clear = 1 + len(drafts) + top
        Chunk.objects.filter(pk__in=[chunk.pk for chunk in changed]).update(
            index=F("index") + clear
        )
        Chunk.objects.bulk_update(changed, _KEPT_CHUNK_COLUMNS, batch_size=WRITE_BATCH)
    embedded: set[int] = set()
    if kept:
        kept_ids = [chunk.pk for chunk in kept]
        Embedding.objects.filter(chunk_id__in=kept_ids).exclude(model=model).delete()
        embedded = set(
            Embedding.objects.filter(chunk_id__in=kept_ids, model=model).values_list(
                "chunk_id", flat=True
            )
        )
    chunks = [chunk for chunk in kept if chunk.pk not in embedded] + _chunks_create(document, new)
    Embedding.objects.bulk_create(
        [
            Embedding(chunk=chunk, vector=vectors[(chunk.text_hash, chunk.section)], model=model)
            for chunk in chunks
        ],
        batch_size=WRITE_BATCH,
    )


def _chunks_create(document: Document, drafts: list[ChunkDraft]) -> list[Chunk]:
    """Create the document's chunks for `drafts` (the one place chunks are created)."""
    return Chunk.objects.bulk_create(
        [Chunk(document=document, **_chunk_fields(draft)) for draft in drafts],
        batch_size=WRITE_BATCH,
    )


def document_mark_failed(
    *, document_id: int | None, source: str, error: str, fields: dict
) -> Document | None:
    """Record the failure on the document: the one of `document_id` (None, and nothing
    written, if it was deleted since), else the one of `source`, created with `fields` if
    there is none (a new file). A ready document keeps its status and its chunks (the last
    good version stays searchable) and shows the error; any other is marked failed (and
    never searched)."""
    with transaction.atomic():
        document = _document_for_update(document_id, source)
        if document is None:
            return None
        if document.pk is None:
            for name, value in fields.items():
                setattr(document, name, value)
        elif "enabled" in fields:
            document.enabled = fields["enabled"]
        if document.status != Document.Status.READY:
            document.status = Document.Status.FAILED
        document.error = error
        document.reprocessing_since = None
        document.save()
    return document
