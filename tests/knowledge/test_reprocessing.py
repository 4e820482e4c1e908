"""Re-processing a document keeps its last good version searchable (docs/product.md §3:
readers keep the old version until the new one is committed), and only staff allowed to change
documents may enable, disable or re-process them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from knowledge.access import OPERATOR
from knowledge.models import Chunk, Document, Embedding
from knowledge.retrieval import chunks_search
from knowledge.search_scope import searchable_chunks
from knowledge.selectors import document_is_stalled
from knowledge.services import document_ingest, document_process, documents_reprocess
from tests.support.live_server import BASE_DIR, LOG_DIR, database_url_of

pytestmark = pytest.mark.django_db

LIST_URL = reverse("admin:knowledge_document_changelist")
DATABASE_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

HANDBOOK = """# Bicycle scheme

Every employee who has passed probation may lease a bicycle worth up to 1,500 pounds.
"""
HANDBOOK_V2 = """# Bicycle scheme

Every employee may lease a bicycle worth up to 2,000 pounds, from the first day.
"""


@pytest.fixture
def handbook(tmp_path) -> Document:
    path = tmp_path / "bicycle.md"
    path.write_text(HANDBOOK, encoding="utf-8")
    document = document_ingest(path=path).document
    assert document.status == Document.Status.READY
    return document


def found(document: Document) -> bool:
    """Whether a search for the document's subject retrieves it."""
    result = chunks_search(reader=OPERATOR, query="lease a bicycle", top_k=5)
    return document.pk in {chunk.document_id for chunk in result.chunks}


def test_a_document_queued_for_reprocessing_stays_searchable(
    handbook, settings, django_capture_on_commit_callbacks
):
    settings.TASKS = DATABASE_TASKS  # queued only: no worker runs

    with django_capture_on_commit_callbacks(execute=True):
        assert documents_reprocess(ids=[handbook.pk]) == (1, 0)

    handbook.refresh_from_db()
    assert handbook.status == Document.Status.READY
    assert handbook.reprocessing_since is not None
    assert found(handbook)
    # Queued again while queued: skipped, as for a new document.
    assert documents_reprocess(ids=[handbook.pk]) == (0, 1)


# --- A real worker, paused inside its swap transaction -----------------------------------------
# The worker (`manage.py ingest_worker`, a subprocess on the test database) processes the
# document; the test holds a row lock on the document's chunks from a connection of its own, so
# the worker stops inside the swap transaction, after it has written the document's row and
# before it replaces the chunks. What other connections see meanwhile, and what is left when the
# worker is killed there, is then checked for real.


@contextmanager
def chunks_locked(document: Document) -> Iterator[psycopg.Connection]:
    """Hold `SELECT … FOR UPDATE` on the document's chunks, from a connection of its own,
    until the block ends (then rolled back)."""
    with psycopg.connect(database_url_of(connection.settings_dict)) as locker:
        locker.execute(
            "SELECT id FROM knowledge_chunk WHERE document_id = %s FOR UPDATE", [document.pk]
        ).fetchall()
        yield locker
        locker.rollback()


@contextmanager
def worker_running() -> Iterator[subprocess.Popen]:
    """`manage.py ingest_worker` on the test database until the block ends (stopped, or
    killed if it does not stop)."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url_of(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "TASKS_BACKEND": DATABASE_TASKS["default"]["BACKEND"],
        "PYTHONUNBUFFERED": "1",
    }
    command = [sys.executable, "manage.py", "ingest_worker", "--interval", "0.2"]
    LOG_DIR.mkdir(exist_ok=True)
    with (LOG_DIR / "ingest-worker-swap.log").open("w") as log:
        process = subprocess.Popen(command, cwd=BASE_DIR, env=env, stdout=log, stderr=log)
        try:
            yield process
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def backend_waiting_inside_its_swap(timeout: float = 180.0) -> int:
    """The pid of the database backend of another connection that has written in its open
    transaction (it holds a transaction id) and now waits for a row lock: the worker, paused
    in the swap. Fails if none does within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' "
                "AND backend_xid IS NOT NULL AND query ILIKE %s",
                ["%knowledge_chunk%"],
            )
            row = cursor.fetchone()
            if row:
                return row[0]
            time.sleep(0.2)
    raise AssertionError("the worker never reached the swap of the document's chunks")


def wait_until(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def backend_gone(pid: int) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid])
        return cursor.fetchone() is None


def reprocess_queued(document: Document, settings) -> None:
    """Queue the document's re-processing for the worker (committed: transactional test)."""
    settings.TASKS = DATABASE_TASKS
    assert documents_reprocess(ids=[document.pk]) == (1, 0)


def snapshot(document: Document) -> tuple:
    """What readers of the document see: its row's version fields, its chunks and whether a
    search finds it."""
    row = Document.objects.values_list("status", "content_hash", "error").get(pk=document.pk)
    chunks = list(Chunk.objects.filter(document=document).order_by("pk").values_list("pk", "text"))
    embedded = Embedding.objects.filter(chunk__document=document).count()
    return row, chunks, embedded, found(document)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_other_connections_see_the_old_version_while_the_swap_is_under_way(handbook, settings):
    before = snapshot(handbook)
    Path(handbook.source).write_text(HANDBOOK_V2, encoding="utf-8")
    reprocess_queued(handbook, settings)

    with worker_running() as worker, chunks_locked(handbook):
        backend_waiting_inside_its_swap()
        # The worker has written the document's row in its transaction and waits to swap
        # the chunks: this connection still reads the old version, whole.
        assert snapshot(handbook) == before
        assert before[0][0] == "ready" and before[2] == len(before[1]) and before[3]
        assert worker.poll() is None

    # Lock released: the worker commits the new version, all at once.
    wait_until(lambda: Document.objects.get(pk=handbook.pk).reprocessing_since is None)
    handbook.refresh_from_db()
    assert (handbook.status, handbook.error) == ("ready", "")
    texts = list(handbook.chunks.values_list("text", flat=True))
    assert any("2,000 pounds" in text for text in texts)
    assert not any("1,500 pounds" in text for text in texts)
    assert Embedding.objects.filter(chunk__document=handbook).count() == len(texts)
    assert found(handbook)


def test_a_failed_reparse_keeps_the_last_good_version_and_shows_the_error(handbook):
    before = set(handbook.chunks.values_list("pk", flat=True))
    Path(handbook.source).write_bytes(b"   \n")  # now unparseable

    outcome = document_process(document=handbook)

    assert outcome.action == "failed"
    handbook.refresh_from_db()
    assert handbook.status == Document.Status.READY
    assert handbook.reprocessing_since is None
    assert "empty" in handbook.error
    assert set(searchable_chunks(reader=OPERATOR).values_list("pk", flat=True)) == before
    assert found(handbook)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_killed_mid_document_leaves_the_previous_version_and_can_be_requeued(
    handbook, settings
):
    before = snapshot(handbook)
    Path(handbook.source).write_text(HANDBOOK_V2, encoding="utf-8")
    reprocess_queued(handbook, settings)

    with worker_running() as worker:
        with chunks_locked(handbook):
            pid = backend_waiting_inside_its_swap()
            worker.send_signal(signal.SIGKILL)  # inside the swap transaction
            worker.wait(timeout=20)
        # Its backend finds the client gone once it has the lock, and rolls back.
        wait_until(lambda: backend_gone(pid))

    assert snapshot(handbook) == before
    handbook.refresh_from_db()
    assert handbook.status == Document.Status.READY
    # Still "being re-processed" until it is stalled; then it may be queued again.
    assert handbook.reprocessing_since is not None
    assert documents_reprocess(ids=[handbook.pk]) == (0, 1)
    Document.objects.filter(pk=handbook.pk).update(
        reprocessing_since=timezone.now() - timedelta(hours=1)
    )
    handbook.refresh_from_db()
    assert document_is_stalled(handbook)
    assert documents_reprocess(ids=[handbook.pk]) == (1, 0)
    document_process(document=handbook)
    handbook.refresh_from_db()
    assert (handbook.status, handbook.reprocessing_since) == ("ready", None)
    assert any("2,000 pounds" in t for t in handbook.chunks.values_list("text", flat=True))


def test_the_admin_list_shows_a_ready_document_being_reprocessed(
    admin_client, handbook, settings, django_capture_on_commit_callbacks
):
    settings.TASKS = DATABASE_TASKS
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            LIST_URL, {"action": "reprocess_documents", "_selected_action": [handbook.pk]}
        )

    listing = admin_client.get(LIST_URL).content.decode()

    assert "Ready · re-processing" in listing
    assert '<meta http-equiv="refresh"' in listing


# --- Permissions of the actions ---------------------------------------------------------------
@pytest.fixture
def viewer(client, django_user_model):
    """Staff allowed to view documents, not to change them."""
    user = django_user_model.objects.create_user(username="viewer", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_document"))
    client.force_login(user)
    return client


@pytest.mark.parametrize("action", ["enable_documents", "disable_documents", "reprocess_documents"])
def test_staff_who_may_only_view_documents_cannot_run_the_actions(
    viewer, settings, action, django_capture_on_commit_callbacks
):
    settings.TASKS = DATABASE_TASKS
    document = Document.objects.create(
        title="Old", source="/nowhere/old.md", status=Document.Status.FAILED, enabled=False
    )
    before = Document.objects.values().get(pk=document.pk)

    assert viewer.get(LIST_URL).status_code == 200
    assert action not in viewer.get(LIST_URL).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        viewer.post(LIST_URL, {"action": action, "_selected_action": [document.pk]})

    assert Document.objects.values().get(pk=document.pk) == before
