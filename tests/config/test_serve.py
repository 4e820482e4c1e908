"""`bin/serve` keeps the ingestion worker running: a worker that dies is started again, and
the web server keeps serving meanwhile."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection

from tests.support.live_server import database_url_of, free_port

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def read_until(stream, pattern: str, timeout: float) -> re.Match:
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            time.sleep(0.05)
            continue
        seen += line
        match = re.search(pattern, seen)
        if match:
            return match
    raise AssertionError(f"{pattern!r} not seen in:\n{seen}")


def test_serve_restarts_a_worker_that_dies_and_keeps_serving():
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k != "DB_POOL"},
        "DATABASE_URL": database_url_of(connection.settings_dict),
        "EMBEDDING_WARM_UP": "0",
        "PORT": str(port),
        "PYTHONUNBUFFERED": "1",
    }
    serve = subprocess.Popen(
        [str(Path(settings.BASE_DIR) / "bin" / "serve")],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        first = int(read_until(serve.stdout, r"ingestion worker pid (\d+)", 120).group(1))
        os.kill(first, signal.SIGKILL)  # the worker dies (out of memory, say)

        second = int(read_until(serve.stdout, r"ingestion worker pid (\d+)\.", 30).group(1))

        assert second != first
        os.kill(second, 0)  # running
        assert serve.poll() is None
        deadline = time.monotonic() + 60
        while True:
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/login/", timeout=10)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                time.sleep(0.3)
        assert response.status_code == 200
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
