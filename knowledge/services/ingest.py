"""Ingestion: files in, searchable chunks out.

The work per document is: read the bytes, skip if unchanged (same sha256, status ready, cut
by today's chunker: `Document.chunker_version`),
parse, chunk, find which chunks already have an embedding under the current model anywhere
in the knowledge base (same text hash and same section, as the heading path is part of what
the model reads), embed only the others, then swap the document's chunks and embeddings in
one transaction. Everything slow happens before that transaction, so
readers see the old version until the new one is complete, and a failure leaves no
half-written chunks behind. The swap keeps the chunks whose text and section did not change
(same rows, so the answers citing them still point at them) and replaces only the others.

A document that existed when its processing started is written back by its id: if it was
deleted meanwhile (by an admin, or by `purge_expired`), nothing is written and the outcome
says so (`IngestOutcome.deleted`); it is never re-created from its `source`. Fields filled
only when the document has none (the title) are decided inside the swap transaction, so a
title an admin set meanwhile stays (docs/decisions/0090-a-document-written-back-by-its-id.md).

When many files are ingested, the texts of several documents wait in a window and go to
the model together: one call sorts them by length, so batches carry little padding and the
model runs at its own speed however small the documents are. Each document is still
written in its own transaction.

Re-processing an existing document (`document_process`) and re-chunking documents from their
original files (`documents_reindex`) run the same steps.
"""

from __future__ import annotations

import hashlib
import logging
import mimetypes
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from knowledge import embedding
from knowledge.chunking import CHUNKER_VERSION, ChunkDraft, chunks_build
from knowledge.models import Chunk, Collection, Document, Embedding
from knowledge.parsers import (
    DocumentParseError,
    UnsupportedFileType,
    file_type_check,
)
from knowledge.parsers.isolated import document_parse_isolated
from knowledge.services.paths import file_open_nofollow, file_open_within, paths_expand
from knowledge.services.vectors import (
    WRITE_BATCH,
    VectorKey,
    chunk_sentences,
    documents_sentences,
    sentence_vectors_prune,
    sentence_vectors_write,
    sentences_missing,
    texts_embed,
    vectors_known,
)
from knowledge.signals import knowledge_changed_send

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

logger = logging.getLogger(__name__)

Action = Literal["new", "updated", "unchanged", "failed"]

Progress = Callable[[int], None]


def _embed_window() -> int:
    """Texts collected from several documents before the model is called."""
    return max(256, 4 * settings.EMBEDDING_BATCH_SIZE)


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


class IngestError(Exception):
    """A step of ingestion failed; the message is meant for the user."""


@dataclass
class _Job:
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


def document_ingest(
    *,
    path: Path,
    title: str | None = None,
    enabled: bool = True,
    uploaded_by: AbstractBaseUser | None = None,
    dry_run: bool = False,
    source: str | None = None,
    expires_at: datetime | None = None,
    collection: Collection | None = None,
    sync_root: str = "",
) -> IngestOutcome:
    """Ingest one file. New → created; changed → chunks replaced; unchanged → untouched
    (but for `expires_at`, which is set whenever it is given).

    `source` (default: the resolved path) identifies the document across runs. An explicit
    `title` wins; otherwise a new document takes the file's own title or first heading, else
    its prettified file name, and an existing document keeps its title. An existing document
    keeps its `enabled` flag unless `enabled=False` asks to disable it. A new document is
    created in `collection` (default: General, `Document.collection`'s default) in the same
    statement, so it is never in another collection even briefly; an existing one keeps its
    collection.
    """
    window = _Window()
    window.add(
        _ingest_job(
            path=Path(path),
            title=title,
            enabled=enabled,
            uploaded_by=uploaded_by,
            dry_run=dry_run,
            source=source,
            expires_at=expires_at,
            collection=collection,
            sync_root=sync_root,
        )
    )
    return window.outcomes()[0]


def document_process(*, document: Document) -> IngestOutcome:
    """(Re)parse and (re)index an existing document from its uploaded file, else from its
    `source` path.

    A document without a searchable version goes processing → ready, or failed with a
    readable error. A ready document stays ready (and searchable, its last good version)
    while it is re-processed (`reprocessing_since` set): the new chunks replace the old ones
    in one transaction, and a failure keeps the old version and records the error. A worker
    killed mid-document leaves the previous version intact; the document then shows as
    stalled and can be re-processed. A document deleted while it is processed stays deleted:
    the outcome is "failed" with `deleted` set and `document` None."""
    had_chunks = document.status == Document.Status.READY or document.chunks.exists()
    now = timezone.now()
    if document.status == Document.Status.READY:
        Document.objects.filter(pk=document.pk).update(reprocessing_since=now, updated_at=now)
    else:
        Document.objects.filter(pk=document.pk).update(
            status=Document.Status.PROCESSING, error="", reprocessing_since=None, updated_at=now
        )
    try:
        window = _Window()
        window.add(_rebuild_job(document=document, action="updated" if had_chunks else "new"))
        outcome = window.outcomes()[0]
    except Exception as exc:  # never leave a document stuck in "processing"
        logger.exception("Processing document %s failed", document.pk)
        error = f"Unexpected error while processing the document: {exc}"
        outcome = IngestOutcome(document.source, "failed", document, 0, error)
    if outcome.deleted:  # nothing was written, nothing re-created (already logged)
        return outcome
    if outcome.action == "failed":  # recorded once more: a write that failed recorded nothing
        document_mark_failed(
            document_id=document.pk, source=document.source, error=outcome.error, fields={}
        )
    current = Document.objects.filter(pk=document.pk).first()
    if current is None:  # deleted meanwhile: nothing was written, nothing re-created
        return _deleted_outcome(document.source, document.pk)
    outcome.document = current
    return outcome


def documents_ingest(
    *,
    paths: list[Path],
    title: str | None,
    enabled: bool,
    dry_run: bool,
    progress: Progress | None = None,
    expires_at: datetime | None = None,
    collection: Collection | None = None,
    sync_root: str = "",
) -> list[IngestOutcome]:
    """Ingest files and directories (walked recursively; files of unsupported types inside a
    directory are skipped, see `paths_expand`). One file failing never stops the others.
    Outcomes in file order; `progress(1)` as each file is done. `expires_at`: when every
    ingested document expires (see `Document.expires_at`); `collection`, `sync_root`: where
    new documents are created and which sync owns them (see `document_ingest`)."""
    files, _skipped = paths_expand(paths)
    window = _Window(progress=progress)
    for file in files:
        try:
            step = _ingest_job(
                path=file,
                title=title,
                enabled=enabled,
                dry_run=dry_run,
                expires_at=expires_at,
                collection=collection,
                sync_root=sync_root,
            )
        except Exception as exc:  # one broken file must not stop a batch; logged in full
            logger.exception("Ingesting %s failed", file)
            step = IngestOutcome(str(file), "failed", None, 0, f"Unexpected error: {exc}")
        window.add(step)
    return window.outcomes()


@dataclass
class SourcedFile:
    """A file fetched from a site or a share, to ingest as the document `source` (its URL)."""

    name: str  # the file name whose extension picks the parser
    data: bytes
    source: str
    title: str | None = None  # an explicit title (a page's own), else the parser's or the name's
    metadata: dict = field(default_factory=dict)  # merged over the document's (url, validators)


def documents_ingest_sourced(
    *,
    files: list[SourcedFile],
    progress: Progress | None = None,
    collection: Collection | None = None,
    sync_root: str = "",
) -> list[IngestOutcome]:
    """Ingest fetched files, each as the document of its own `source` (not its path), as
    `documents_ingest` does: one file failing never stops the others, outcomes in order."""
    window = _Window(progress=progress)
    for file in files:
        try:
            step = _ingest_job(
                path=Path(file.name),
                data=file.data,
                title=file.title,
                enabled=True,
                dry_run=False,
                source=file.source,
                collection=collection,
                sync_root=sync_root,
                metadata=file.metadata,
            )
        except Exception as exc:  # one broken file must not stop a batch; logged in full
            logger.exception("Ingesting %s failed", file.source)
            step = IngestOutcome(file.source, "failed", None, 0, f"Unexpected error: {exc}")
        window.add(step)
    return window.outcomes()


def documents_reindex(
    *, documents: Iterable[Document], progress: Progress | None = None
) -> list[IngestOutcome]:
    """Re-chunk and re-embed the given documents from their original files (embeddings of
    unchanged texts are reused). A document stays searchable (old chunks) until its new
    chunks replace them; one whose original cannot be read is reported failed and left as
    it was. Outcomes in order; `progress(1)` as each document is done."""
    window = _Window(progress=progress)
    for document in documents:
        try:
            step = _rebuild_job(document=document, action="updated", keep_unreadable=True)
        except Exception as exc:  # one broken document must not stop a batch; logged in full
            logger.exception("Re-indexing document %s failed", document.pk)
            step = IngestOutcome(document.source, "failed", document, 0, f"{exc}")
        window.add(step)
    return window.outcomes()


def title_from_name(name: str) -> str:
    """A title from a file name: "staff-handbook_2026.md" → "Staff handbook 2026"."""
    stem = Path(name).stem
    words = " ".join(re.sub(r"[_\-.]+", " ", stem).split()) or stem
    return (words[:1].upper() + words[1:])[:300] if words.islower() else words[:300]


class _Window:
    """Collects jobs until enough texts wait for the model, embeds them in one call, then
    writes each document in its own transaction. Outcomes keep the order of `add`."""

    def __init__(self, progress: Progress | None = None) -> None:
        self._results: list[IngestOutcome | None] = []
        self._jobs: list[tuple[int, _Job]] = []
        self._waiting = 0
        self._progress = progress

    def add(self, step: IngestOutcome | _Job) -> None:
        position = len(self._results)
        self._results.append(None)
        if isinstance(step, IngestOutcome):
            self._done(position, step)
            return
        self._jobs.append((position, step))
        self._waiting += len(step.missing) + len(step.sentences_missing)
        if self._waiting >= _embed_window():
            self.flush()

    def flush(self) -> None:
        jobs, self._jobs, self._waiting = self._jobs, [], 0
        if not jobs:
            return
        _jobs_embed([job for _, job in jobs])
        for position, job in jobs:
            try:
                outcome = _job_write(job)
            except Exception as exc:  # one document must not stop the others; logged in full
                logger.exception("Writing %s failed", job.source)
                error = f"Unexpected error: {exc}"
                outcome = IngestOutcome(job.source, "failed", job.existing, 0, error)
            self._done(position, outcome)

    def outcomes(self) -> list[IngestOutcome]:
        self.flush()
        return [outcome for outcome in self._results if outcome is not None]

    def _done(self, position: int, outcome: IngestOutcome) -> None:
        self._results[position] = outcome
        if self._progress:
            self._progress(1)


def _ingest_job(
    *,
    path: Path,
    title: str | None,
    enabled: bool,
    dry_run: bool,
    uploaded_by: AbstractBaseUser | None = None,
    source: str | None = None,
    expires_at: datetime | None = None,
    collection: Collection | None = None,
    sync_root: str = "",
    metadata: dict | None = None,
    data: bytes | None = None,
) -> IngestOutcome | _Job:
    """Read, check, parse and chunk one file: a final outcome, or a job to embed and write.
    `metadata` is merged over the document's (and the parser's) when it is written; `data`,
    when given, is the file's bytes (fetched from a site or share: `path` only names it)."""
    source = source or str(path.resolve())
    if len(source) > Document._meta.get_field("source").max_length:
        return IngestOutcome(source, "failed", None, 0, "The file's path is too long to store.")
    try:
        file_type_check(path.name)
        if data is None:
            data = _file_read(path, sync_root=sync_root)
    except UnsupportedFileType as exc:
        return IngestOutcome(source, "failed", None, 0, str(exc))
    except OSError as exc:
        return IngestOutcome(source, "failed", None, 0, f"Could not read the file: {exc}")

    content_hash = hashlib.sha256(data).hexdigest()
    existing = Document.objects.filter(source=source).first()
    if (
        existing is not None
        and existing.content_hash == content_hash
        and existing.status == Document.Status.READY
        and existing.chunker_version == CHUNKER_VERSION
    ):
        if expires_at is not None and existing.expires_at != expires_at and not dry_run:
            Document.objects.filter(pk=existing.pk).update(expires_at=expires_at)
            existing.expires_at = expires_at
        return IngestOutcome(source, "unchanged", existing, existing.chunks.count())
    action: Action = "updated" if existing is not None else "new"

    def fields_for(parsed_title: str | None) -> dict:
        fields: dict = {"media_type": _media_type(path.name)}
        if title:
            fields["title"] = title[:300]
        elif existing is None:  # a failure creates the document with these fields
            fields["title"] = parsed_title or title_from_name(path.name)
        if existing is None:
            fields.update(enabled=enabled, uploaded_by=uploaded_by)
            if collection is not None:
                fields["collection"] = collection
            if sync_root:
                fields["sync_root"] = sync_root
            if metadata:
                fields["metadata"] = metadata
        elif not enabled:
            fields["enabled"] = False
        if expires_at is not None:
            fields["expires_at"] = expires_at
        return fields

    try:
        parsed = document_parse_isolated(
            data=data, name=path.name, progress=_progress_writer(source)
        )
        drafts = _drafts(parsed=parsed, name=path.name)
    except DocumentParseError as exc:
        document = None
        if not dry_run:
            document = document_mark_failed(
                document_id=existing.pk if existing is not None else None,
                source=source,
                error=str(exc),
                fields=fields_for(None),
            )
            if existing is not None and document is None:
                return _deleted_outcome(source, existing.pk)
        return IngestOutcome(source, "failed", document or existing, 0, str(exc))
    if dry_run:
        return IngestOutcome(source, action, existing, len(drafts))
    fields = fields_for(parsed.title)
    return _job_new(
        source=source,
        action=action,
        existing=existing,
        content_hash=content_hash,
        drafts=drafts,
        fields={k: v for k, v in fields.items() if title or k != "title"},
        blank_fields={"title": parsed.title or title_from_name(path.name)},
        metadata={**(parsed.metadata or {}), **(metadata or {})},
        failure_fields=fields,
    )


def _rebuild_job(
    *, document: Document, action: Action, keep_unreadable: bool = False
) -> IngestOutcome | _Job:
    """Re-read and re-chunk an existing document. With `keep_unreadable`, a missing original
    leaves the document untouched; otherwise it is marked failed."""
    try:
        data, name = _read_original(document)
        parsed = document_parse_isolated(
            data=data, name=name, progress=_progress_writer(document.source)
        )
        drafts = _drafts(parsed=parsed, name=name)
    except (IngestError, DocumentParseError) as exc:
        if not (keep_unreadable and isinstance(exc, IngestError)):
            marked = document_mark_failed(
                document_id=document.pk, source=document.source, error=str(exc), fields={}
            )
            if marked is None:
                return _deleted_outcome(document.source, document.pk)
            document = marked
        return IngestOutcome(document.source, "failed", document, 0, str(exc))
    return _job_new(
        source=document.source,
        action=action,
        existing=document,
        content_hash=hashlib.sha256(data).hexdigest(),
        drafts=drafts,
        fields={"media_type": _media_type(name)},
        blank_fields={"title": parsed.title or title_from_name(name)},
        metadata=parsed.metadata or {},
        failure_fields={},
    )


def _deleted_outcome(source: str, document_id: int) -> IngestOutcome:
    logger.warning(
        "Document %s (%s) was deleted while it was being processed; nothing was written.",
        document_id,
        source,
    )
    return IngestOutcome(source, "failed", None, 0, DELETED_MEANWHILE, deleted=True)


def _drafts(*, parsed, name: str) -> list[ChunkDraft]:
    drafts = chunks_build(parsed=parsed)
    if not drafts:
        raise DocumentParseError(f"No text could be extracted from {Path(name).name}.")
    return drafts


def _job_new(**fields) -> _Job:
    """A job whose texts already embedded under the current model (anywhere in the
    knowledge base) are looked up now; only the others will be sent to the model."""
    job = _Job(**fields)
    job.known = vectors_known([(draft.text_hash, draft.section) for draft in job.drafts])
    for draft in job.drafts:
        key = (draft.text_hash, draft.section)
        if key not in job.known:
            job.missing.setdefault(key, draft.embedding_input)
    job.sentences_missing = sentences_missing([(d.text, bool(d.sheet)) for d in job.drafts])
    return job


def _jobs_embed(jobs: list[_Job]) -> None:
    """Embed the missing texts of all jobs together (each distinct text once). If the model
    fails, each job is tried alone so one bad document cannot fail the others."""
    missing: dict[Any, str] = {}
    for job in jobs:
        missing.update(job.missing)
        missing.update({("sentence", key): text for key, text in job.sentences_missing.items()})
    try:
        vectors = texts_embed(missing)  # chunks and sentences in one call, batched by length
    except Exception as exc:  # the model failing is reported on the documents, not raised
        if len(jobs) > 1:
            for job in jobs:
                _jobs_embed([job])
            return
        logger.exception("Embedding %s failed", jobs[0].source)
        jobs[0].error = f"Could not compute embeddings: {exc}"
        return
    for job in jobs:
        job.known.update({key: vectors[key] for key in job.missing})
        job.missing = {}
        job.sentence_vectors = {key: vectors[("sentence", key)] for key in job.sentences_missing}
        job.sentences_missing = {}


def _job_write(job: _Job) -> IngestOutcome:
    """Write one embedded job (or record its failure) and say what happened."""
    document_id = job.existing.pk if job.existing is not None else None
    if job.error:
        document = document_mark_failed(
            document_id=document_id, source=job.source, error=job.error, fields=job.failure_fields
        )
        if document is None:
            return _deleted_outcome(job.source, document_id)
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
        return _deleted_outcome(job.source, document_id)
    return IngestOutcome(job.source, job.action, document, len(job.drafts))


def _write(job: _Job) -> Document | None:
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


def _progress_writer(source: str) -> Callable[[str], None]:
    """Records what a slow parser is doing on the document `source` (`Document.progress`,
    shown in the admin while it runs); nothing for a document not created yet. Each report
    also moves `updated_at`: a document making progress is never taken for one a dead worker
    left behind (`documents_fail_interrupted`)."""

    def write(message: str) -> None:
        Document.objects.filter(source=source).update(
            progress=message[:200], updated_at=timezone.now()
        )

    return write


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


def _media_type(name: str) -> str:
    try:
        return file_type_check(name)
    except UnsupportedFileType:
        return mimetypes.guess_type(name)[0] or "application/octet-stream"


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


def _read_original(document: Document) -> tuple[bytes, str]:
    """The bytes of the document's uploaded file, else of the file at its `source` path,
    and the file name whose extension picks the parser."""
    if document.file:
        try:
            with document.file.open("rb") as handle:
                return handle.read(), document.file.name
        except OSError as exc:
            raise IngestError(f"Could not read the uploaded file: {exc}") from exc
    path = Path(document.source)
    if not path.is_file():
        raise IngestError(
            f"The original file is no longer available ({document.source}); upload it again."
        )
    try:
        return _file_read(path, sync_root=document.sync_root), path.name
    except OSError as exc:
        raise IngestError(f"Could not read the file: {exc}") from exc


def _file_read(path: Path, *, sync_root: str) -> bytes:
    """The bytes of `path`: a synced file from inside its folder `sync_root`, any other file
    as named; neither through a symbolic link (`PathRefused`, an `OSError`)."""
    opened = file_open_within(path, root=sync_root) if sync_root else file_open_nofollow(path)
    with opened as handle:
        return handle.read()
