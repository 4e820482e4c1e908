"""A document's life after ingestion: queued for (re-)processing, enabled or disabled, and
purged once expired."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime
from functools import partial

from django.db import transaction
from django.utils import timezone

from knowledge.models import Document
from knowledge.selectors import STALLED_AFTER, documents_expired, documents_in_progress
from knowledge.services.document_write import document_mark_failed
from knowledge.services.ingest_window import Progress
from knowledge.signals import knowledge_changed_send

logger = logging.getLogger(__name__)

_PURGE_BATCH = 100  # documents deleted per transaction


def document_processing_enqueue(document: Document) -> None:
    """Queue background processing of `document` once the current transaction commits, so
    the worker never looks for a row that is not there yet and the request returns at once.
    A queue that cannot be reached records the failure on the document instead of losing it
    (a ready document keeps its searchable version)."""
    # Imported here: the task imports the services that process the document.
    from knowledge.tasks import document_process_task

    def enqueue(document_id: int, source: str) -> None:
        try:
            document_process_task.enqueue(document_id)
        except Exception as exc:  # the request must not fail after the upload was saved
            logger.exception("Could not queue processing of document %s", document_id)
            error = f"Could not queue the document for processing ({exc}). Re-process it."
            document_mark_failed(document_id=document_id, source=source, error=error, fields={})

    transaction.on_commit(partial(enqueue, document.pk, document.source))


def documents_set_enabled(*, ids: Iterable[int], enabled: bool) -> int:
    """Enable or disable documents; returns how many changed."""
    changed = (
        Document.objects.filter(pk__in=list(ids))
        .exclude(enabled=enabled)
        .update(enabled=enabled, updated_at=timezone.now())
    )
    if changed:
        knowledge_changed_send()
    return changed


def documents_reprocess(*, ids: Iterable[int]) -> tuple[int, int]:
    """Queue documents for background processing again; those already waiting or being
    processed are left alone (unless stalled). A ready document stays ready and searchable
    until its new version replaces it. Returns (queued, skipped)."""
    queued = 0
    with transaction.atomic():
        documents = Document.objects.filter(pk__in=list(ids)).select_for_update()
        busy_ids = set(documents_in_progress(documents).values_list("pk", flat=True))
        now = timezone.now()
        for document in documents.exclude(pk__in=busy_ids):
            if document.status == Document.Status.READY:
                document.reprocessing_since = now
            else:
                document.status = Document.Status.PENDING
                document.reprocessing_since = None
            document.error = ""
            document.save(update_fields=["status", "error", "reprocessing_since", "updated_at"])
            document_processing_enqueue(document)
            queued += 1
    return queued, len(busy_ids)


INTERRUPTED_ERROR = (
    "Processing stopped before it finished: the worker was stopped, or ran out of memory or "
    "time on this file. Re-process the document to try again; if it stops again, the file "
    "is too large or damaged."
)


def documents_fail_interrupted(*, now: datetime | None = None) -> int:
    """Mark failed, with a readable error, the documents left `processing` for longer than
    STALLED_AFTER: their worker was killed mid-document (a hostile file, out of memory) and
    no worker will finish them. They are not queued again (the same file could kill the next
    worker); re-processing them is the user's choice. Documents still waiting for a worker
    (`pending`) are left to the queue. Returns how many were marked."""
    now = now or timezone.now()
    return Document.objects.filter(
        status=Document.Status.PROCESSING, updated_at__lt=now - STALLED_AFTER
    ).update(status=Document.Status.FAILED, error=INTERRUPTED_ERROR, updated_at=now)


def documents_purge_expired(
    *, now: datetime | None = None, dry_run: bool = False, progress: Progress | None = None
) -> list[Document]:
    """Delete the expired documents (their chunks and embeddings go with them; answers that
    cited them keep their citation snapshots, shown as from a removed document) and their
    uploaded files. Batches by pk, each in its own transaction; `progress(n)` after each.
    Returns the documents deleted (or, with `dry_run`, that would be)."""
    now = now or timezone.now()
    if dry_run:
        return list(documents_expired(now=now))
    storage = Document._meta.get_field("file").storage
    deleted: list[Document] = []
    last_pk = 0
    while True:
        with transaction.atomic():
            batch = list(
                documents_expired(now=now).filter(pk__gt=last_pk).select_for_update()[:_PURGE_BATCH]
            )
            if not batch:
                return deleted
            last_pk = batch[-1].pk
            names = [document.file.name for document in batch if document.file]
            Document.objects.filter(pk__in=[document.pk for document in batch]).delete()
            knowledge_changed_send()

            def remove(names: list[str] = names) -> None:
                for name in names:
                    if storage.exists(name):
                        storage.delete(name)

            transaction.on_commit(remove)
        deleted.extend(batch)
        if progress:
            progress(len(batch))
