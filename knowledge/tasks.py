"""Background work of the knowledge app, run by the django-tasks worker (`db_worker`)."""

from __future__ import annotations

import logging

from django_tasks import task

from knowledge.models import Document

logger = logging.getLogger(__name__)


@task()
def document_process_task(document_id: int) -> str:
    """Chunk and embed an uploaded document in the background; returns the outcome action.

    A document deleted before the worker got to it is skipped, not an error; one deleted
    while the worker processes it stays deleted (nothing is written, "deleted" is returned
    and logged). Failures of the
    document itself (unreadable file, unsupported type) are recorded on the document by
    `document_process` (status `failed` with a readable error), so the task still succeeds.
    """
    # Imported here: knowledge.services.lifecycle queues this task (and importing
    # knowledge.services runs the whole package).
    from knowledge.services.ingest import document_process

    document = Document.objects.filter(pk=document_id).first()
    if document is None:
        logger.info("document %s was deleted before it could be processed", document_id)
        return "missing"
    outcome = document_process(document=document)
    if outcome.deleted:
        logger.warning(
            "document %s (%s) was deleted while it was being processed: it stays deleted, "
            "nothing was written",
            document_id,
            outcome.source,
        )
        return "deleted"
    logger.info(
        "processed document %s (%s): %s, %s chunks",
        document.pk,
        outcome.source,
        outcome.action,
        outcome.chunks,
    )
    return outcome.action


@task()
def source_sync_task(source_id: int) -> str:
    """Re-scan one source, a folder, site or share (knowledge/sources/services.py,
    `source_sync`); returns the run's status, or "skipped" when the source was deleted or
    disabled meanwhile or another sync of it was running. A source that cannot be synced
    gets a failed run with the reason, and the task still succeeds."""
    from knowledge.sources.services import source_sync

    run = source_sync(source_id=source_id)
    return run.status if run is not None else "skipped"
