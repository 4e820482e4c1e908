"""A real Redis for tests: Debian's redis-server (`make redis` installs it) on a free port of
127.0.0.1, nothing written to disk, stopped when the block ends."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.support.live_server import free_port

REDIS_SERVER = "redis-server"


@contextmanager
def redis_server(*, timeout: float = 20.0) -> Iterator[str]:
    """Run redis-server until the block ends; yields its redis:// URL."""
    executable = shutil.which(REDIS_SERVER)
    if executable is None:
        pytest.fail("redis-server is missing: install Debian's redis-server (`make redis`).")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="sourced-redis-") as workdir:
        process = subprocess.Popen(
            [
                executable,
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                workdir,
                "--protected-mode",
                "yes",
            ],  # fmt: skip
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + timeout
            while True:
                if process.poll() is not None:
                    output = process.stdout.read().decode(errors="replace")
                    raise RuntimeError(f"redis-server exited at start:\n{output}")
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
                        conn.sendall(b"PING\r\n")
                        if conn.recv(16).startswith(b"+PONG"):
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("redis-server did not start in time")
                time.sleep(0.1)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stdout is not None:
                process.stdout.close()
