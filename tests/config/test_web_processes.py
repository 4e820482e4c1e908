"""`python -m config.web`: several daphne processes on one socket, all serving, all stopped
together; one exiting stops the others."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from django.db import connection

from tests.support.live_server import database_url_of, free_port, process_alive

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


def start(port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": database_url_of(connection.settings_dict),
        "EMBEDDING_WARM_UP": "0",
    }
    return subprocess.Popen(
        [sys.executable, "-m", "config.web", "--port", str(port), "--processes", "2"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_serving(port: int) -> None:
    deadline = time.monotonic() + 90
    while True:
        try:
            assert httpx.get(f"http://127.0.0.1:{port}/login/", timeout=10).status_code == 200
            return
        except httpx.TransportError:
            assert time.monotonic() < deadline
            time.sleep(0.3)


def test_two_processes_serve_one_port_and_stop_together():
    port = free_port()
    web = start(port)
    try:
        wait_serving(port)
        daphnes = children(web.pid)
        assert len(daphnes) == 2 and all(process_alive(pid) for pid in daphnes)
        for _ in range(10):
            assert httpx.get(f"http://127.0.0.1:{port}/login/", timeout=10).status_code == 200
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=40)
    assert web.returncode == 0
    assert not any(process_alive(pid) for pid in daphnes)


def test_one_process_dying_stops_the_others_with_an_error_status():
    port = free_port()
    web = start(port)
    try:
        wait_serving(port)
        first, second = children(web.pid)
        os.kill(first, signal.SIGKILL)
        web.wait(timeout=40)
    finally:
        if web.poll() is None:
            web.kill()
            web.wait()
    assert web.returncode != 0
    assert not process_alive(second)
