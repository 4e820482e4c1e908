"""Ingestion: files in, searchable chunks out.

The work per document is: read the bytes, skip if unchanged (same sha256, status ready),
parse, chunk, find which chunk texts already have an embedding under the current model
(anywhere in the knowledge base), embed only the others in batches, then swap the document's
chunks and embeddings in one transaction. Everything slow happens before that transaction,
so readers see the old version until the new one is complete, and a failure leaves no
half-written chunks behind.
"""

from __future__ import annotations

import hashlib
import logging
import mimetypes
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import QuerySet

from knowledge import embedding
from knowledge.chunking import ChunkDraft, chunks_build
from knowledge.models import Chunk, Document, Embedding
from knowledge.parsing import (
    DocumentParseError,
    UnsupportedFileType,
    document_parse,
    file_type_check,
    is_supported,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

logger = logging.getLogger(__name__)

Action = Literal["new", "updated", "unchanged", "failed"]
Progress = Callable[[int], None]

_LOOKUP_BATCH = 1000  # text hashes per embedding-cache query
_WRITE_BATCH = 500  # rows per INSERT
_STALE_BATCH = 256  # chunks per re-embedding round


@dataclass
class IngestOutcome:
    source: str
    action: Action
    document: Document | None
    chunks: int
    error: str = ""


@dataclass(frozen=True)
class _Prepared:
    """A parsed, chunked and embedded document, ready to be written."""

    title: str | None
    media_type: str
    drafts: list[ChunkDraft]
    vectors: np.ndarray  # one row per draft
    embedded: int  # how many texts the model had to embed (the rest came from the cache)


class IngestError(Exception):
    """A step of ingestion failed; the message is meant for the user."""


# --- Public services ---------------------------------------------------------------------


def document_ingest(
    *,
    path: Path,
    title: str | None = None,
    enabled: bool = True,
    uploaded_by: AbstractBaseUser | None = None,
    dry_run: bool = False,
    source: str | None = None,
) -> IngestOutcome:
    """Ingest one file. New → created; changed → chunks replaced; unchanged → untouched.

    `source` (default: the resolved path) identifies the document across runs. An explicit
    `title` wins; otherwise a new document takes the file's own title or first heading, else
    its prettified file name, and an existing document keeps its title. An existing document
    keeps its `enabled` flag unless `enabled=False` asks to disable it.
    """
    path = Path(path)
    source = source or str(path.resolve())
    if len(source) > Document._meta.get_field("source").max_length:
        return IngestOutcome(source, "failed", None, 0, "The file's path is too long to store.")
    try:
        file_type_check(path.name)
        data = path.read_bytes()
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
    ):
        return IngestOutcome(source, "unchanged", existing, existing.chunks.count())
    action: Action = "updated" if existing is not None else "new"

    if dry_run:
        try:
            parsed = document_parse(data=data, name=path.name)
            drafts = chunks_build(parsed=parsed)
        except DocumentParseError as exc:
            return IngestOutcome(source, "failed", existing, 0, str(exc))
        return IngestOutcome(source, action, existing, len(drafts))

    def fields_for(prepared: _Prepared | None) -> dict:
        fields: dict = {"media_type": _media_type(path.name)}
        if title:
            fields["title"] = title[:300]
        elif existing is None:
            fields["title"] = (prepared and prepared.title) or title_from_name(path.name)
        if existing is None:
            fields.update(enabled=enabled, uploaded_by=uploaded_by)
        elif not enabled:
            fields["enabled"] = False
        return fields

    try:
        prepared = _prepare(data=data, name=path.name)
    except IngestError as exc:
        document = _mark_failed(source=source, error=str(exc), fields=fields_for(None))
        return IngestOutcome(source, "failed", document, 0, str(exc))

    try:
        document = _write(
            source=source,
            prepared=prepared,
            content_hash=content_hash,
            fields=fields_for(prepared),
        )
    except IntegrityError as exc:
        logger.warning("Concurrent ingestion of %s: %s", source, exc)
        error = "The document was changed by another ingestion at the same time; try again."
        return IngestOutcome(source, "failed", existing, 0, error)
    except DatabaseError as exc:  # rolled back: the previous version is still complete
        logger.exception("Saving %s failed", source)
        return IngestOutcome(source, "failed", existing, 0, f"Could not save the document: {exc}")
    return IngestOutcome(source, action, document, len(prepared.drafts))


def document_process(*, document: Document) -> IngestOutcome:
    """(Re)parse and (re)index an existing document from its uploaded file, else from its
    `source` path. Status goes processing → ready, or failed with a readable error."""
    had_chunks = document.status == Document.Status.READY or document.chunks.exists()
    Document.objects.filter(pk=document.pk).update(status=Document.Status.PROCESSING, error="")
    document.status, document.error = Document.Status.PROCESSING, ""
    try:
        outcome = _document_rebuild(document=document, action="updated" if had_chunks else "new")
    except Exception as exc:  # never leave a document stuck in "processing"
        logger.exception("Processing document %s failed", document.pk)
        error = f"Unexpected error while processing the document: {exc}"
        _mark_failed(source=document.source, error=error, fields={})
        outcome = IngestOutcome(document.source, "failed", document, 0, error)
    document.refresh_from_db()
    outcome.document = document
    return outcome


def documents_ingest(
    *,
    paths: list[Path],
    title: str | None,
    enabled: bool,
    dry_run: bool,
    progress: Progress | None = None,
) -> list[IngestOutcome]:
    """Ingest files and directories (walked recursively; files of unsupported types inside a
    directory are skipped, see `paths_expand`). One file failing never stops the others.
    `progress(1)` is called after each file."""
    files, _skipped = paths_expand(paths)
    outcomes: list[IngestOutcome] = []
    for file in files:
        try:
            outcome = document_ingest(path=file, title=title, enabled=enabled, dry_run=dry_run)
        except Exception as exc:  # one broken file must not stop a batch; logged in full
            logger.exception("Ingesting %s failed", file)
            outcome = IngestOutcome(str(file), "failed", None, 0, f"Unexpected error: {exc}")
        outcomes.append(outcome)
        if progress:
            progress(1)
    return outcomes


def paths_expand(paths: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """(files to ingest, files skipped). Directories are walked recursively, hidden entries
    and office lock files ignored, files of unsupported types skipped; a file named
    explicitly is always kept (so that its type is refused with a clear error)."""
    files: list[Path] = []
    skipped: list[Path] = []
    seen: set[Path] = set()

    def keep(file: Path) -> None:
        resolved = file.resolve()
        if resolved not in seen:
            seen.add(resolved)
            files.append(file)

    for path in paths:
        path = Path(path)
        if not path.is_dir():
            keep(path)
            continue
        for root, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                if name.startswith((".", "~$")):
                    continue
                file = Path(root) / name
                if is_supported(name):
                    keep(file)
                else:
                    skipped.append(file)
    return files, skipped


def embeddings_stale() -> QuerySet[Chunk]:
    """Chunks without an embedding under the configured model."""
    return Chunk.objects.exclude(embeddings__model=embedding.model_version())


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
            .values_list("pk", "text", "text_hash")[:_STALE_BATCH]
        )
        if not batch:
            return done
        last_pk = batch[-1][0]
        vectors, _ = _vectors_for([text for _, text, _ in batch], [h for _, _, h in batch])
        chunk_ids = [pk for pk, _, _ in batch]
        with transaction.atomic():
            Embedding.objects.filter(chunk_id__in=chunk_ids).exclude(model=model).delete()
            Embedding.objects.bulk_create(
                [
                    Embedding(chunk_id=pk, vector=vector, model=model)
                    for pk, vector in zip(chunk_ids, vectors, strict=True)
                ],
                batch_size=_WRITE_BATCH,
                ignore_conflicts=True,  # another process fixed the same chunk meanwhile
            )
        done += len(batch)
        if progress:
            progress(len(batch))


def documents_reindex(
    *, documents: Iterable[Document], progress: Progress | None = None
) -> list[IngestOutcome]:
    """Re-chunk and re-embed the given documents from their original files. A document stays
    searchable (old chunks) until its new chunks replace them; one whose original cannot be
    read is reported failed and left as it was. `progress(1)` after each document."""
    outcomes: list[IngestOutcome] = []
    for document in documents:
        try:
            outcome = _document_rebuild(document=document, action="updated", keep_on_read=True)
        except Exception as exc:  # one broken document must not stop a batch; logged in full
            logger.exception("Re-indexing document %s failed", document.pk)
            outcome = IngestOutcome(document.source, "failed", document, 0, f"{exc}")
        outcomes.append(outcome)
        if progress:
            progress(1)
    return outcomes


def title_from_name(name: str) -> str:
    """ "staff-handbook_2026.md" → "Staff handbook 2026"."""
    stem = Path(name).stem
    words = " ".join(re.sub(r"[_\-.]+", " ", stem).split()) or stem
    return (words[:1].upper() + words[1:])[:300] if words.islower() else words[:300]


# --- Steps -------------------------------------------------------------------------------


def _media_type(name: str) -> str:
    try:
        return file_type_check(name)
    except UnsupportedFileType:
        return mimetypes.guess_type(name)[0] or "application/octet-stream"


def _prepare(*, data: bytes, name: str) -> _Prepared:
    """Parse, chunk and embed; raises IngestError with a readable message."""
    try:
        parsed = document_parse(data=data, name=name)
        drafts = chunks_build(parsed=parsed)
    except DocumentParseError as exc:
        raise IngestError(str(exc)) from exc
    if not drafts:
        raise IngestError(f"No text could be extracted from {Path(name).name}.")
    try:
        vectors, embedded = _vectors_for([d.text for d in drafts], [d.text_hash for d in drafts])
    except Exception as exc:  # the model failing is reported on the document, not raised
        logger.exception("Embedding %s failed", name)
        raise IngestError(f"Could not compute embeddings: {exc}") from exc
    return _Prepared(parsed.title, parsed.media_type, drafts, vectors, embedded)


def _vectors_for(texts: Sequence[str], hashes: Sequence[str]) -> tuple[np.ndarray, int]:
    """A vector per text: copied from an existing embedding of the same text under the
    current model when there is one, else computed in batches. Returns (vectors, computed)."""
    model = embedding.model_version()
    known: dict[str, object] = {}
    unique_hashes = list(dict.fromkeys(hashes))
    for start in range(0, len(unique_hashes), _LOOKUP_BATCH):
        part = unique_hashes[start : start + _LOOKUP_BATCH]
        rows = (
            Embedding.objects.filter(model=model, chunk__text_hash__in=part)
            .order_by()
            .values_list("chunk__text_hash", "vector")
        )
        for text_hash, vector in rows:
            known.setdefault(text_hash, vector)
    missing: dict[str, str] = {}
    for text, text_hash in zip(texts, hashes, strict=True):
        if text_hash not in known:
            missing.setdefault(text_hash, text)
    batch_size = settings.EMBEDDING_BATCH_SIZE
    missing_items = list(missing.items())
    for start in range(0, len(missing_items), batch_size):
        part = missing_items[start : start + batch_size]
        computed = embedding.embed_texts([text for _, text in part], batch_size=batch_size)
        for (text_hash, _), vector in zip(part, computed, strict=True):
            known[text_hash] = vector
    vectors = np.asarray([known[h] for h in hashes], dtype=np.float32).reshape(
        len(hashes), embedding.DIMENSIONS
    )
    return vectors, len(missing_items)


def _write(*, source: str, prepared: _Prepared, content_hash: str, fields: dict) -> Document:
    """Swap in the new chunks and embeddings, and mark the document ready, atomically."""
    model = embedding.model_version()
    with transaction.atomic():
        document = Document.objects.select_for_update().filter(source=source).first()
        if document is None:
            document = Document(source=source)
        for name, value in fields.items():
            setattr(document, name, value)
        document.content_hash = content_hash
        document.status = Document.Status.READY
        document.error = ""
        document.save()
        _chunks_replace(document=document, prepared=prepared, model=model)
    return document


def _chunks_replace(*, document: Document, prepared: _Prepared, model: str) -> None:
    """Inside the caller's transaction: delete the document's chunks (their embeddings
    cascade; citations keep their snapshot) and bulk-insert the new ones."""
    Embedding.objects.filter(chunk__document=document).delete()
    Chunk.objects.filter(document=document).only("pk").delete()
    chunks = Chunk.objects.bulk_create(
        [
            Chunk(
                document=document,
                index=draft.index,
                text=draft.text,
                page=draft.page,
                section=draft.section,
                char_start=draft.char_start,
                char_end=draft.char_end,
                token_count=draft.token_count,
                text_hash=draft.text_hash,
            )
            for draft in prepared.drafts
        ],
        batch_size=_WRITE_BATCH,
    )
    Embedding.objects.bulk_create(
        [
            Embedding(chunk=chunk, vector=vector, model=model)
            for chunk, vector in zip(chunks, prepared.vectors, strict=True)
        ],
        batch_size=_WRITE_BATCH,
    )


def _mark_failed(*, source: str, error: str, fields: dict) -> Document:
    """Record the failure on the document (created if new). Its chunks are left as they
    were; a failed document is never searched."""
    with transaction.atomic():
        document = Document.objects.select_for_update().filter(source=source).first()
        if document is None:
            document = Document(source=source, **fields)
        elif "enabled" in fields:
            document.enabled = fields["enabled"]
        document.status = Document.Status.FAILED
        document.error = error
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
        return path.read_bytes(), path.name
    except OSError as exc:
        raise IngestError(f"Could not read the file: {exc}") from exc


def _document_rebuild(
    *, document: Document, action: Action, keep_on_read: bool = False
) -> IngestOutcome:
    """Re-read, re-chunk and re-embed `document` (embeddings of unchanged texts are reused).
    With `keep_on_read`, a missing original leaves the document untouched."""
    try:
        data, name = _read_original(document)
    except IngestError as exc:
        if not keep_on_read:
            _mark_failed(source=document.source, error=str(exc), fields={})
        return IngestOutcome(document.source, "failed", document, 0, str(exc))
    try:
        prepared = _prepare(data=data, name=name)
    except IngestError as exc:
        _mark_failed(source=document.source, error=str(exc), fields={})
        document.refresh_from_db()
        return IngestOutcome(document.source, "failed", document, 0, str(exc))
    fields = {"media_type": _media_type(name)}
    if not document.title:
        fields["title"] = prepared.title or title_from_name(name)
    document = _write(
        source=document.source,
        prepared=prepared,
        content_hash=hashlib.sha256(data).hexdigest(),
        fields=fields,
    )
    return IngestOutcome(document.source, action, document, len(prepared.drafts))
