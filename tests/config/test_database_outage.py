"""The web server and the ingestion worker survive a database outage: during it, requests get
a 503 (the API's `upstream-unavailable` envelope, a friendly page in the browser) within
seconds, the worker waits and retries instead of exiting; once the database is back both serve
again without a restart.

The test runs its own embedded PostgreSQL in a temporary folder (never the suite's), stopped
and started with the very command an operator uses: `python -m config.embedded_db stop`.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from django.conf import settings

from tests.support.clients import sse_events
from tests.support.embedded_server import embedded_server_env
from tests.support.embedded_server import python_run as run
from tests.support.live_server import daphne_server

pytestmark = pytest.mark.slow

BASE_DIR = Path(settings.BASE_DIR)


@pytest.fixture(scope="module")
def outage_db(tmp_path_factory) -> Iterator[tuple[str, dict[str, str]]]:
    """A PostgreSQL of this test's own, migrated: (its URL, the environment that points
    the project's processes at it)."""
    data_dir = tmp_path_factory.mktemp("outage") / "postgres"
    control = embedded_server_env(data_dir)
    url = run(["-m", "config.embedded_db"], control).splitlines()[-1]
    env = {
        **control,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "EMBEDDING_WARM_UP": "0",
        "PYTHONUNBUFFERED": "1",
    }
    run(["manage.py", "migrate", "--noinput"], env)
    yield url, control
    run(["-m", "config.embedded_db", "stop"], control)


def db_stop(control: dict[str, str]) -> None:
    assert "stopped" in run(["-m", "config.embedded_db", "stop"], control)


def db_start(control: dict[str, str]) -> None:
    run(["-m", "config.embedded_db"], control)


def test_web_server_answers_503_during_an_outage_and_serves_again_after(outage_db):
    url, control = outage_db
    api_headers = {"Authorization": f"Token {secrets.token_hex(20)}"}  # a DB lookup
    page_cookies = {"sessionid": secrets.token_hex(16)}  # a DB lookup too
    # A request waits at most DB_POOL_TIMEOUT for a connection (10 s by default; 2 s here, so
    # the four requests of the outage take seconds, not most of a minute).
    server_env = {"EMBEDDING_WARM_UP": "0", "DB_POOL_TIMEOUT": "2"}
    with daphne_server(url, env=server_env) as base:
        client = httpx.Client(base_url=base, timeout=30)
        page_client = httpx.Client(base_url=base, timeout=30, cookies=page_cookies)
        assert client.get("/api/conversations", headers=api_headers).status_code == 401
        assert page_client.get("/history/").status_code == 302  # to the login page

        db_stop(control)
        try:
            started = time.monotonic()
            api = client.get("/api/conversations", headers=api_headers)
            api_seconds = time.monotonic() - started
            started = time.monotonic()
            page = page_client.get("/history/")
            page_seconds = time.monotonic() - started
            # The OpenAI-compatible API and the MCP endpoint: their own error shapes.
            models = client.get("/v1/models", headers=api_headers)
            mcp = client.post(
                "/mcp/",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers=api_headers,
            )
        finally:
            db_start(control)

        assert models.status_code == 503, models.text
        assert models.json()["error"]["type"] == "service_unavailable"
        assert int(models.headers["Retry-After"]) >= 1
        assert mcp.status_code == 503, mcp.text
        assert mcp.json()["error"]["code"] == "upstream-unavailable"

        assert api.status_code == 503, api.text
        assert api.json()["error"]["code"] == "upstream-unavailable"
        assert int(api.headers["Retry-After"]) >= 1
        assert page.status_code == 503
        assert "Temporarily unavailable" in page.text and "try again" in page.text
        assert api_seconds < 7 and page_seconds < 7  # DB_POOL_TIMEOUT is 2 s

        # The database is back: the same server serves again (its broken pooled connections
        # are dropped, not lent).
        deadline = time.monotonic() + 30
        statuses = []
        while time.monotonic() < deadline:
            statuses = [
                client.get("/api/conversations", headers=api_headers).status_code for _ in range(3)
            ]
            if statuses == [401, 401, 401]:
                break
            time.sleep(0.5)
        assert statuses == [401, 401, 401]
        assert page_client.get("/history/").status_code == 302


def test_ingestion_worker_waits_out_an_outage_then_processes_tasks(outage_db, tmp_path):
    url, control = outage_db
    env = {
        **control,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "ingest_worker",
                "--interval",
                "0.2",
                "--no-startup-delay",
            ],
            cwd=BASE_DIR,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        # Polling the queue: the worker says so once its start-up queries are done.
        output_wait(log, worker, "Starting worker", times=1)
        db_stop(control)
        try:
            # Several failed polls (1 s, then 2 s apart), each of which would have ended
            # db_worker.
            output_wait(log, worker, "retries in", times=3)
            assert worker.poll() is None, log.read_text()
        finally:
            db_start(control)

        # A task queued once the database is back is processed by the same worker (a
        # document deleted before processing: the task succeeds with "missing").
        code = (
            "from knowledge.tasks import document_process_task; "
            "print(document_process_task.enqueue(987654).id)"
        )
        task_id = run(["manage.py", "shell", "-c", code], env).splitlines()[-1]
        deadline = time.monotonic() + 60
        status = None
        while time.monotonic() < deadline:
            with psycopg.connect(url) as conn:
                row = conn.execute(
                    "SELECT status, return_value FROM django_tasks_database_dbtaskresult "
                    "WHERE id = %s",
                    [task_id],
                ).fetchone()
            status = row[0] if row else None
            if status == "SUCCESSFUL":
                break
            time.sleep(0.2)
        assert status == "SUCCESSFUL", log.read_text() if worker.poll() is not None else ""
        assert row[1] == "missing"
        assert worker.poll() is None
    finally:
        worker.terminate()
        try:
            worker.wait(timeout=15)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    assert "retries in" in log.read_text()  # it said what it was doing


def output_wait(log: Path, process: subprocess.Popen, text: str, *, times: int) -> None:
    """Wait (at most 60 s) until `process` has written `text` `times` times to `log`."""
    deadline = time.monotonic() + 60
    while log.read_text().count(text) < times:
        assert process.poll() is None, log.read_text()
        assert time.monotonic() < deadline, f"{text!r} not {times} times in:\n{log.read_text()}"
        time.sleep(0.1)


def test_an_answer_streaming_when_the_database_goes_away_ends_with_an_error_event(outage_db):
    """The database stops while an answer streams: the client gets the `upstream-unavailable`
    error event (not a hang, not a dropped connection), the question is kept, and once the
    database is back the same server answers the same user again."""
    url, control = outage_db
    env = {
        **control,
        "DATABASE_URL": url,
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    # The handbook ingested and the user made in one process (one start-up, not two).
    code = (
        "from django.core.management import call_command; "
        "from django.contrib.auth import get_user_model; "
        "from rest_framework.authtoken.models import Token; "
        f"call_command('ingest', {str(BASE_DIR / 'demo' / 'staff-handbook.md')!r}); "
        "user = get_user_model().objects.create_user('outage', password='x', is_staff=True); "
        "print(Token.objects.create(user=user).key)"
    )
    token = run(["manage.py", "shell", "-c", code], env).splitlines()[-1]
    headers = {"Authorization": f"Token {token}", "Accept": "text/event-stream"}
    question = "How many days of annual leave do full-time employees get?"
    # Each answer piece waits 1 s: the database is stopped while the answer streams (its
    # nine pieces outlast the stop, which takes a second or two, by several seconds).
    server_env = {"EMBEDDING_WARM_UP": "0", "CHAT_STREAM_DELAY_MS": "1000"}
    with daphne_server(url, env=server_env) as base, httpx.Client(base_url=base) as client:
        events: list[tuple[str, dict]] = []
        message_id = str(uuid.uuid4())
        body = {"message": question, "message_id": message_id}
        try:
            with client.stream("POST", "/api/chat", json=body, headers=headers, timeout=90) as r:
                assert r.status_code == 200
                for event in sse_events(r):
                    events.append(event)
                    if event[0] == "answer_delta" and not stopped(events):
                        db_stop(control)
                        events.append(("database stopped", {}))
        finally:
            db_start(control)
        kinds = [kind for kind, _ in events]
        assert "database stopped" in kinds, kinds
        assert kinds[-1] == "error", kinds
        assert events[-1][1]["code"] == "upstream-unavailable", events[-1]
        assert "answer_end" not in kinds

        with psycopg.connect(url) as conn:
            (kept,) = conn.execute(
                "SELECT content FROM chat_message WHERE id = %s", [message_id]
            ).fetchone()
        assert kept == question

        # The database is back: the same server answers the same user (a new question, whose
        # answer is one sentence: two pieces, two seconds of delays, not nine).
        deadline = time.monotonic() + 60
        while True:
            body = {"message": "When is the handbook reviewed?", "message_id": str(uuid.uuid4())}
            with client.stream("POST", "/api/chat", json=body, headers=headers, timeout=90) as r:
                status = r.status_code
                kinds = [kind for kind, _ in sse_events(r)] if status == 200 else []
            if status != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert status == 200
        assert kinds[-1] == "answer_end", kinds


def stopped(events: list[tuple[str, dict]]) -> bool:
    return any(kind == "database stopped" for kind, _ in events)
