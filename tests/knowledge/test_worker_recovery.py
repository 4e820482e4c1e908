"""A worker killed in the middle of a document (out of memory on a hostile file, SIGKILL)
leaves it `processing`; the next worker to start or to take a task marks such a document
failed with a readable message once it has stalled, instead of leaving it processing for
ever, and never runs the file again by itself."""

from __future__ import annotations

import signal
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from knowledge.models import Document
from knowledge.selectors import STALLED_AFTER
from knowledge.services import document_process, document_write, documents_reprocess
from knowledge.worker import ResilientWorker

pytestmark = pytest.mark.django_db(transaction=True)

DATABASE_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}


def worker_run_batch() -> None:
    """What `manage.py ingest_worker --batch` does: run until the queue is empty."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    worker = ResilientWorker(
        queue_names=["default"],
        interval=0.1,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id="worker-after-the-crash",
        excluded_queue_names=[],
    )
    try:
        worker.run()
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def killed_mid_document(tmp_path: Path, monkeypatch) -> Document:
    """A new document whose worker died while writing it (SystemExit is what nothing in
    ingestion catches, as a SIGKILL would not be caught)."""
    path = tmp_path / "deck.md"
    path.write_text("# Deck\n\nThe reorder lead time is nine working days.\n", encoding="utf-8")
    document = Document.objects.create(
        source=str(path), title="Deck", status=Document.Status.PENDING
    )

    def killed(*args, **kwargs):
        raise SystemExit("SIGKILL")

    monkeypatch.setattr(document_write, "_write", killed)
    with pytest.raises(SystemExit):
        document_process(document=document)
    monkeypatch.undo()
    document.refresh_from_db()
    assert document.status == Document.Status.PROCESSING
    return document


def age(document: Document, by: timedelta) -> None:
    Document.objects.filter(pk=document.pk).update(updated_at=timezone.now() - by)


def test_a_document_left_processing_by_a_killed_worker_fails_readably_once_stalled(
    tmp_path, monkeypatch, settings
):
    settings.TASKS = DATABASE_TASKS
    document = killed_mid_document(tmp_path, monkeypatch)
    age(document, STALLED_AFTER + timedelta(minutes=1))
    recent = Document.objects.create(
        source="upload:recent/notes.md", title="Notes", status=Document.Status.PROCESSING
    )
    age(recent, STALLED_AFTER - timedelta(minutes=5))

    worker_run_batch()

    document.refresh_from_db()
    assert document.status == Document.Status.FAILED
    assert "stopped before it finished" in document.error
    assert "Re-process" in document.error
    assert not document.chunks.exists()
    recent.refresh_from_db()
    assert recent.status == Document.Status.PROCESSING  # maybe still being processed


def test_a_failed_interrupted_document_can_be_processed_again(tmp_path, monkeypatch, settings):
    settings.TASKS = DATABASE_TASKS
    document = killed_mid_document(tmp_path, monkeypatch)
    age(document, STALLED_AFTER + timedelta(minutes=1))
    worker_run_batch()

    assert documents_reprocess(ids=[document.pk]) == (1, 0)
    worker_run_batch()

    document.refresh_from_db()
    assert (document.status, document.error) == (Document.Status.READY, "")
    assert document.chunks.exists()


def test_waiting_documents_are_left_to_the_queue(settings):
    """A document still waiting for a worker (pending) is processed when one starts, not
    failed, however long it waited."""
    settings.TASKS = DATABASE_TASKS
    waiting = Document.objects.create(
        source="upload:old/notes.md", title="Notes", status=Document.Status.PENDING
    )
    age(waiting, STALLED_AFTER * 4)

    worker_run_batch()

    waiting.refresh_from_db()
    assert waiting.status == Document.Status.PENDING
