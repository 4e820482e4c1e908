"""Watched folders: the ingestion worker (knowledge/worker.py, the real loop) re-scans each on
its interval into its collection, and the admin shows each folder's last run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from knowledge.access import documents_readable
from knowledge.collections import collection_create
from knowledge.models import Document, Source, SyncRun
from knowledge.services.sync import folder_root
from knowledge.sources.services import sources_rescan_now
from tests.support.live_server import database_url_of
from tests.support.readers import readers_create

LIST_URL = reverse("admin:knowledge_source_changelist")
ADD_URL = reverse("admin:knowledge_source_add")


def change_url(folder: Source) -> str:
    return reverse("admin:knowledge_source_change", args=[folder.pk])


@pytest.fixture
def shared(tmp_path) -> Path:
    folder = tmp_path / "shared"
    (folder / "hr").mkdir(parents=True)
    (folder / "leave.md").write_text(
        "# Annual leave\n\nFull-time employees receive 25 days of paid annual leave.\n", "utf-8"
    )
    (folder / "hr" / "pay.md").write_text(
        "# Pay bands\n\nA Grade 7 analyst earns between 41,000 and 48,000 pounds.\n", "utf-8"
    )
    return folder


def worker_batch() -> None:
    """The ingestion worker, run until its queue is empty (the real loop, `--batch`)."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # Not niced: the command lowers the priority of the process it runs in, here the
        # test run's own, for every test after this one.
        with override_settings(INGEST_WORKER_NICE=0):
            call_command("ingest_worker", "--batch", "--no-startup-delay", stdout=StringIO())
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


def test_the_worker_rescans_a_watched_folder_on_its_interval_into_its_collection(
    shared, transactional_db
):
    readers = readers_create()
    hr_only = collection_create(name="HR only", groups=[readers["hr"]])
    folder = Source.objects.create(
        location=folder_root(shared), collection=hr_only, interval_minutes=30
    )

    worker_batch()

    synced = Document.objects.filter(sync_root=folder.location)
    assert synced.count() == 2
    assert {d.collection_id for d in synced} == {hr_only.pk}
    assert documents_readable(user=readers["asker"]).filter(pk__in=synced).count() == 2
    assert not documents_readable(user=readers["staff"]).filter(pk__in=synced).exists()
    run = SyncRun.objects.get()
    assert (run.source_id, run.trigger, run.status, run.added) == (
        folder.pk,
        "worker",
        "finished",
        2,
    )
    folder.refresh_from_db()
    assert timedelta(minutes=29) < folder.next_run_at - timezone.now() <= timedelta(minutes=30)

    (shared / "leave.md").write_text("# Annual leave\n\nIt is 28 days now.\n", "utf-8")
    (shared / "hr" / "pay.md").unlink()
    worker_batch()  # not due yet: nothing happens
    assert SyncRun.objects.count() == 1
    assert synced.count() == 2

    Source.objects.filter(pk=folder.pk).update(
        next_run_at=timezone.now() - timedelta(seconds=1)  # the interval has passed
    )
    worker_batch()

    latest = SyncRun.objects.latest("started_at")
    assert (latest.updated, latest.removed, latest.status) == (1, 1, "finished")
    (leave,) = Document.objects.filter(sync_root=folder.location)
    assert "28 days" in leave.chunks.get().text


def test_a_disabled_watched_folder_is_not_rescanned(shared, transactional_db):
    Source.objects.create(location=folder_root(shared), enabled=False)

    worker_batch()

    assert not Document.objects.exists()
    assert not SyncRun.objects.exists()


def test_a_watched_folder_that_went_away_gets_a_failed_run_with_the_reason(
    shared, transactional_db, admin_client
):
    folder = Source.objects.create(location=folder_root(shared))
    worker_batch()
    for path in sorted(shared.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    shared.rmdir()
    sources_rescan_now(ids=[folder.pk])

    worker_batch()

    run = SyncRun.objects.latest("started_at")
    assert run.status == SyncRun.Status.FAILED
    assert "No such folder" in run.message
    assert Document.objects.filter(sync_root=folder.location).count() == 2  # nothing removed
    page = admin_client.get(change_url(folder)).content.decode()
    assert "No such folder" in page and "Failed" in page


def test_the_continuous_worker_rescans_a_folder_made_due(shared, transactional_db):
    """The worker as `bin/serve` runs it (not `--batch`): its poll finds the folder due."""
    # Only this test's tasks: one another test's process left queued would be run first.
    DBTaskResult.objects.all().delete()
    env = {
        **os.environ,
        "DATABASE_URL": database_url_of(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SYNC_POLL_SECONDS": "0.5",
        "PYTHONUNBUFFERED": "1",
    }
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "ingest_worker", "--interval", "0.2", "--no-startup-delay"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        time.sleep(1)  # started before the folder exists: found by a later poll
        folder = Source.objects.create(location=folder_root(shared), interval_minutes=60)
        first = wait_for_run(folder, count=1, worker=worker)
        assert first.added == 2
        # The worker sets the next re-scan one interval after the run, just after the run is
        # recorded as finished: "rescan now" sent before that would be overwritten by it.
        wait_for_next_run_set(folder, after=first.finished_at + timedelta(minutes=60))

        (shared / "leave.md").write_text("# Annual leave\n\nIt is 30 days now.\n", "utf-8")
        sources_rescan_now(ids=[folder.pk])
        second = wait_for_run(folder, count=2, worker=worker)
        assert (second.updated, second.unchanged) == (1, 1)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def wait_for_next_run_set(folder: Source, *, after) -> None:
    """Wait until the worker has set `folder`'s next re-scan at `after` or later."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        folder.refresh_from_db(fields=["next_run_at"])
        if folder.next_run_at >= after:
            return
        time.sleep(0.1)
    raise AssertionError(f"the next re-scan of {folder.location} was not set within 60 s")


def wait_for_run(folder: Source, *, count: int, worker: subprocess.Popen) -> SyncRun:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        finished = folder.runs.exclude(status=SyncRun.Status.RUNNING).order_by("started_at")
        if finished.count() >= count:
            return list(finished)[count - 1]
        assert worker.poll() is None, worker.stdout.read()
        time.sleep(0.3)
    raise AssertionError(f"no run {count} of {folder.location} within 180 s")


# --- Admin --------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_folder_page_shows_the_last_run_with_its_counts_and_escaped_errors(
    shared, admin_client
):
    folder = Source.objects.create(location=folder_root(shared))
    SyncRun.objects.create(
        root=folder.location,
        source=folder,
        trigger="worker",
        status=SyncRun.Status.FINISHED,
        finished_at=timezone.now(),
        added=3,
        updated=1,
        removed=2,
        failed=1,
        errors=[[f"{folder.location}/<b>bad</b>.md", "No text could be extracted <script>"]],
    )

    listing = admin_client.get(LIST_URL).content.decode()
    page = admin_client.get(change_url(folder)).content.decode()

    assert "3 added, 1 updated, 0 moved, 2 removed, 1 failed" in listing
    assert "3 added, 1 updated, 0 moved, 2 removed, 1 failed" in page
    assert "&lt;b&gt;bad&lt;/b&gt;.md" in page and "&lt;script&gt;" in page
    assert "<b>bad</b>" not in page and "extracted <script>" not in page


@pytest.mark.django_db
def test_adding_a_folder_checks_its_path_and_stores_it_resolved(shared, admin_client, tmp_path):
    missing = admin_client.post(
        ADD_URL,
        {"location": str(tmp_path / "nowhere"), "interval_minutes": 15, "enabled": "on"},
    )
    relative = admin_client.post(ADD_URL, {"location": "shared", "interval_minutes": 15})
    assert "No such folder" in missing.content.decode()
    assert "absolute path" in relative.content.decode()
    assert not Source.objects.exists()

    response = admin_client.post(
        ADD_URL,
        {"location": f"{shared}/hr/..", "interval_minutes": 15, "enabled": "on"},
    )

    assert response.status_code == 302, response.content.decode()
    folder = Source.objects.get()
    assert folder.location == folder_root(shared)
    assert folder.collection.is_default
    inside = admin_client.post(ADD_URL, {"location": str(shared / "hr"), "interval_minutes": 15})
    assert "overlaps the watched folder" in inside.content.decode()
    assert Source.objects.count() == 1


@pytest.mark.django_db
def test_rescan_now_makes_the_folder_due(shared, admin_client):
    folder = Source.objects.create(
        location=folder_root(shared), next_run_at=timezone.now() + timedelta(hours=1)
    )

    admin_client.post(
        LIST_URL, {"action": "rescan_now", "_selected_action": [folder.pk]}, follow=True
    )

    folder.refresh_from_db()
    assert folder.next_run_at <= timezone.now()


@pytest.mark.django_db
def test_only_superusers_manage_watched_folders(shared, client, django_user_model):
    manager = django_user_model.objects.create_user(
        username="manager", password="manager-pass-123", is_staff=True
    )
    manager.user_permissions.add(*Permission.objects.filter(content_type__app_label="knowledge"))
    folder = Source.objects.create(location=folder_root(shared))
    client.force_login(manager)

    assert client.get(LIST_URL).status_code == 403
    assert client.get(change_url(folder)).status_code == 403
    assert client.post(ADD_URL, {"location": "/etc", "interval_minutes": 1}).status_code == 403
    assert LIST_URL not in client.get(reverse("admin:index")).content.decode()


@pytest.mark.django_db
def test_a_document_page_says_which_folder_it_is_synced_from(shared, admin_client):
    call_command("sync", str(shared), stdout=StringIO(), stderr=StringIO())
    document = Document.objects.get(title="Annual leave")

    page = admin_client.get(
        reverse("admin:knowledge_document_change", args=[document.pk])
    ).content.decode()

    assert "Synced from" in page and folder_root(shared) in page
