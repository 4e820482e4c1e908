"""Ingestion: files in, searchable chunks out.

The work per document is: read the bytes, skip if unchanged (same sha256, status ready, cut
by today's chunker: `Document.chunker_version`), parse (in a child process,
knowledge/parsers/isolated.py), chunk, then hand the document to the embedding window
(knowledge/services/ingest_window.py), which embeds only the texts the knowledge base has no
vector for and has each document written in its own transaction
(knowledge/services/document_write.py: the swap, the write back by id). Everything slow
happens before that transaction, so readers see the old version until the new one is
complete, and a failure leaves no half-written chunks behind.

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
from typing import TYPE_CHECKING

from django.utils import timezone

from knowledge.chunking import CHUNKER_VERSION, ChunkDraft, chunks_build
from knowledge.models import Collection, Document
from knowledge.parsers import (
    DocumentParseError,
    UnsupportedFileType,
    file_type_check,
)
from knowledge.parsers.isolated import document_parse_isolated
from knowledge.services.document_write import (
    Action,
    IngestJob,
    IngestOutcome,
    deleted_outcome,
    document_mark_failed,
)
from knowledge.services.ingest_window import IngestWindow, Progress, job_new
from knowledge.services.paths import file_open_nofollow, file_open_within, paths_expand

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser

logger = logging.getLogger(__name__)


class IngestError(Exception):
    """A step of ingestion failed; the message is meant for the user."""


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
    window = IngestWindow()
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
        window = IngestWindow()
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
        return deleted_outcome(document.source, document.pk)
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
    window = IngestWindow(progress=progress)
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
    window = IngestWindow(progress=progress)
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
    window = IngestWindow(progress=progress)
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
) -> IngestOutcome | IngestJob:
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
                return deleted_outcome(source, existing.pk)
        return IngestOutcome(source, "failed", document or existing, 0, str(exc))
    if dry_run:
        return IngestOutcome(source, action, existing, len(drafts))
    fields = fields_for(parsed.title)
    return job_new(
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
) -> IngestOutcome | IngestJob:
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
                return deleted_outcome(document.source, document.pk)
            document = marked
        return IngestOutcome(document.source, "failed", document, 0, str(exc))
    return job_new(
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


def _drafts(*, parsed, name: str) -> list[ChunkDraft]:
    drafts = chunks_build(parsed=parsed)
    if not drafts:
        raise DocumentParseError(f"No text could be extracted from {Path(name).name}.")
    return drafts


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


def _media_type(name: str) -> str:
    try:
        return file_type_check(name)
    except UnsupportedFileType:
        return mimetypes.guess_type(name)[0] or "application/octet-stream"


def _read_original(document: Document) -> tuple[bytes, str]:
    """The bytes of the document's uploaded file, else of the file at its `source` path,
    and the file name whose extension picks the parser."""
    if document.file:
        try:
            with document.file.open("rb") as handle:
                return handle.read(), document.file.name
        except OSError as exc:
            raise IngestError(f"Could not read the uploaded file: {exc}") from exc
    if "://" in document.sync_root:
        raise IngestError(
            f"This document is a copy of {document.source}, from the source "
            f"{document.sync_root}: it is read again from there by the source's next sync "
            "(Sources, in the admin), not re-processed on its own."
        )
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
