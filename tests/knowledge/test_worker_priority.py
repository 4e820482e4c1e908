"""The ingestion worker runs at a lower CPU priority than the web processes
(docs/decisions/0084-reading-files-does-not-starve-answering.md): `manage.py ingest_worker`
raises its niceness by INGEST_WORKER_NICE (a real process is looked at), 0 leaves it alone,
and a value out of 0..19 is refused. It loads the embedding model at start, before any task
(docs/decisions/0085-personal-file-reading-time.md)."""

from __future__ import annotations

import os
import sys
import time

import psutil
import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from tests.support.live_server import BASE_DIR, database_url_of

pytestmark = pytest.mark.django_db


def test_the_worker_process_runs_niced_by_the_setting_and_loads_its_model_at_start(tmp_path):
    import subprocess

    env = {
        **os.environ,
        "DATABASE_URL": database_url_of(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "INGEST_WORKER_NICE": "7",
    }
    log = tmp_path / "worker.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "ingest_worker", "--interval", "0.5"],
            cwd=BASE_DIR,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        expected = min(19, os.nice(0) + 7)
        deadline = time.monotonic() + 90
        niceness = psutil.Process(process.pid).nice()
        while niceness != expected and time.monotonic() < deadline:
            assert process.poll() is None, "the worker exited"
            time.sleep(0.2)
            niceness = psutil.Process(process.pid).nice()
        assert niceness == expected
        # No task was queued: the model is loaded all the same.
        while "Embedding model" not in log.read_text() and time.monotonic() < deadline:
            assert process.poll() is None, log.read_text()[-2000:]
            time.sleep(0.2)
        assert "Embedding model" in log.read_text()
        assert "ready in" in log.read_text()
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_zero_leaves_the_priority_alone_and_a_value_out_of_range_is_refused(settings, monkeypatch):
    from knowledge import worker

    calls: list[int] = []
    monkeypatch.setattr(os, "nice", calls.append)
    monkeypatch.setattr(worker.ResilientWorker, "run", lambda self: None)
    monkeypatch.setattr(worker.ResilientWorker, "configure_signals", lambda self: None)

    settings.INGEST_WORKER_NICE = 0
    call_command("ingest_worker", "--batch")
    assert calls == []
    settings.INGEST_WORKER_NICE = 5
    call_command("ingest_worker", "--batch")
    assert calls == [5]
    settings.INGEST_WORKER_NICE = 20
    with pytest.raises(CommandError, match="between 0 and 19"):
        call_command("ingest_worker", "--batch")


def test_a_worker_failing_at_start_exits_with_its_error_not_an_abort():
    """A worker that fails at once (here: a database nobody migrated) while its model is still
    loading waits for the load before leaving: it exits with its error (status 1), not with
    "terminate called without an active exception" (an abort, status 134)."""
    import subprocess

    import psycopg

    empty = {**connection.settings_dict, "NAME": f"sourced_unmigrated_{os.getpid()}"}
    admin_url = database_url_of({**connection.settings_dict, "NAME": "postgres"})
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{empty["NAME"]}"')
        admin.execute(f'CREATE DATABASE "{empty["NAME"]}"')
    try:
        env = {
            **os.environ,
            "DATABASE_URL": database_url_of(empty),
            "DJANGO_SETTINGS_MODULE": "config.settings",
        }
        result = subprocess.run(
            [sys.executable, "manage.py", "ingest_worker", "--no-startup-delay"],
            cwd=BASE_DIR,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
        assert "does not exist" in result.stderr  # its own error, said
        assert "terminate called" not in result.stderr
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{empty["NAME"]}"')
