"""`bin/serve` keeps the ingestion worker running: a worker that dies is started again, and
the web server keeps serving meanwhile. A stop signal sent twice stops both children once."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection

from tests.support.live_server import database_url_of, free_port, process_alive

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


class Output:
    """What a child process has written to its pipe so far, read without ever blocking past a
    deadline (a `readline()` would wait for ever on a child that writes nothing more)."""

    def __init__(self, stream) -> None:
        self.fd = stream.fileno()
        self.text = ""
        self.at = 0  # where the next search starts: after the previous match

    def read_until(self, pattern: str, timeout: float) -> re.Match:
        deadline = time.monotonic() + timeout
        while True:
            match = re.compile(pattern).search(self.text, self.at)
            if match:
                self.at = match.end()
                return match
            remaining = deadline - time.monotonic()
            readable = remaining > 0 and select.select([self.fd], [], [], remaining)[0]
            chunk = os.read(self.fd, 65536) if readable else b""
            if not chunk:  # the deadline passed, or the child closed its output
                raise AssertionError(f"{pattern!r} not seen in:\n{self.text}")
            self.text += chunk.decode(errors="replace")


def serve_start(port: int) -> subprocess.Popen:
    """`bin/serve` on `port` of 127.0.0.1 against the test database, in a session of its own,
    its output on a pipe."""
    env = {
        **{k: v for k, v in os.environ.items() if k != "DB_POOL"},
        "DATABASE_URL": database_url_of(connection.settings_dict),
        "EMBEDDING_WARM_UP": "0",
        "PORT": str(port),
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.Popen(
        [str(Path(settings.BASE_DIR) / "bin" / "serve")],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def test_serve_restarts_a_worker_that_dies_and_keeps_serving():
    port = free_port()
    serve = serve_start(port)
    output = Output(serve.stdout)
    try:
        first = int(output.read_until(r"ingestion worker pid (\d+)", 120).group(1))
        os.kill(first, signal.SIGKILL)  # the worker dies (out of memory, say)

        second = int(output.read_until(r"ingestion worker pid (\d+)\.", 30).group(1))

        assert second != first
        assert process_alive(second)
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


def test_a_stop_signal_sent_twice_stops_both_children_once():
    """`make run` stopped with SIGTERM to its process group: make passes the signal on to
    `bin/serve`, which gets it twice, the second while it is stopping. It stops the web
    server and the worker, waits for them and says so; it used to die on the second signal
    and leave both running."""
    serve = serve_start(free_port())
    output = Output(serve.stdout)
    children: list[int] = []
    try:
        pids = output.read_until(r"Web server pid (\d+), ingestion worker pid (\d+)", 120)
        web, worker = children = [int(pids.group(1)), int(pids.group(2))]
        serve.send_signal(signal.SIGTERM)
        output.read_until(r"Stopping the web server and the ingestion worker", 10)
        serve.send_signal(signal.SIGTERM)
        output.read_until(r"Stopped\.", 40)
        assert serve.wait(timeout=10) == 0
        assert not process_alive(web) and not process_alive(worker)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        for pid in filter(process_alive, children):  # each in a process group of its own
            os.killpg(pid, signal.SIGKILL)
