"""A real ASGI server for tests: daphne in a subprocess, serving config.asgi against the test
database, on a free port of 127.0.0.1. Rows a test commits (transactional tests) are what it
sees; its own writes are visible to the test."""

from __future__ import annotations

import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parents[2]
LOG_DIR = BASE_DIR / "test-artifacts"
# Streamed pieces are paced on the chat tests' server (`CHAT_STREAM_DELAY_MS`), so a test can
# observe a stream in progress.
LIVE_SERVER_DELAY_MS = 250
# The servers run with the suite's settings (tests/settings.py: the fast password hasher).
TEST_SETTINGS = "tests.settings"


# How often an in-process test server looks whether it was asked to stop: its `shutdown()`
# waits up to this long (http.server's default, 0.5 s, added up to seconds per test file).
SHUTDOWN_POLL_S = 0.05


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_alive(pid: int) -> bool:
    """Whether process `pid` exists and has not ended (a zombie, ended but not yet waited for
    by its parent, counts as ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:  # it ended between the two looks
        return False
    return "State:\tZ" not in status


def server_thread_start(
    server: socketserver.BaseServer, name: str | None = None
) -> threading.Thread:
    """Serve `server` in a daemon thread, looking for `shutdown()` every SHUTDOWN_POLL_S."""
    thread = threading.Thread(
        target=server.serve_forever, args=(SHUTDOWN_POLL_S,), name=name, daemon=True
    )
    thread.start()
    return thread


@contextmanager
def process_serving(
    command: list[str], *, port: int, env: dict[str, str], name: str, timeout: float = 120.0
) -> Iterator[subprocess.Popen]:
    """Run `command` (a server that listens on `port` of 127.0.0.1) until the block ends,
    once it accepts connections. Its output goes to test-artifacts/`name`-`port`.log (kept,
    to read after a failing test), printed if it fails to start."""
    LOG_DIR.mkdir(exist_ok=True)
    with (LOG_DIR / f"{name}-{port}.log").open("w+") as log:
        process = subprocess.Popen(
            command, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"{name} exited at start:\n{log.read()}")
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{name} did not start in time") from None
                    time.sleep(0.2)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def daphne_server(
    database_url: str, *, env: dict[str, str] | None = None, timeout: float = 120.0
) -> Iterator[str]:
    """Run daphne until the block ends; yields its base URL. Its output goes to a log file in
    test-artifacts/ (kept, to read after a failing test), printed if it fails to start."""
    port = free_port()
    environment = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": TEST_SETTINGS,
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    command.append("config.asgi:application")
    with process_serving(command, port=port, env=environment, name="daphne", timeout=timeout):
        yield f"http://127.0.0.1:{port}"


def database_url_of(settings_dict: dict) -> str:
    """A postgresql:// URL for a Django DATABASES entry (socket directories included)."""
    from urllib.parse import quote

    auth = quote(settings_dict.get("USER") or "")
    if settings_dict.get("PASSWORD"):
        auth += ":" + quote(settings_dict["PASSWORD"])
    host = settings_dict.get("HOST") or ""
    name = quote(settings_dict["NAME"])
    if host.startswith("/"):
        port = f"&port={settings_dict['PORT']}" if settings_dict.get("PORT") else ""
        return f"postgresql://{auth}@/{name}?host={quote(host)}{port}"
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    return f"postgresql://{auth}@{host}{port}/{name}"


@contextmanager
def ingest_worker(
    database_url: str, *, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen]:
    """Run `manage.py ingest_worker` (the database task backend) on `database_url` until the
    block ends; its output goes to test-artifacts/ingest-worker-<pid>.log."""
    environment = {
        **os.environ,
        "DATABASE_URL": database_url,
        "DJANGO_SETTINGS_MODULE": TEST_SETTINGS,
        "TASKS_BACKEND": "django_tasks_db.DatabaseBackend",
        "PYTHONUNBUFFERED": "1",
        **(env or {}),
    }
    command = [sys.executable, "manage.py", "ingest_worker", "--interval", "0.2"]
    LOG_DIR.mkdir(exist_ok=True)
    with (LOG_DIR / f"ingest-worker-{os.getpid()}.log").open("w") as log:
        process = subprocess.Popen(
            command, cwd=BASE_DIR, env=environment, stdout=log, stderr=subprocess.STDOUT
        )
        try:
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
