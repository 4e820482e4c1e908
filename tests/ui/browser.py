"""A live ASGI server (daphne, in a subprocess, on the test database) and Debian's Chromium
driven by Playwright, for the browser tests.

The server is a real `daphne config.asgi:application`: HTTP, static files and the WebSocket
consumer as in production. It reads the test database through DATABASE_URL, so what a test
writes (users, documents) is what the server sees.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.db import connection

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def database_url() -> str:
    """The URL of the database the tests use (the test database once it is set up)."""
    db = connection.settings_dict
    auth = quote(db["USER"] or "")
    if db["PASSWORD"]:
        auth += ":" + quote(db["PASSWORD"])
    host = db["HOST"] or ""
    if host.startswith("/"):
        location = f"/{quote(db['NAME'])}?host={quote(host)}"
        if db["PORT"]:
            location += f"&port={db['PORT']}"
        return f"postgresql://{auth}@{location}"
    port = f":{db['PORT']}" if db["PORT"] else ""
    return f"postgresql://{auth}@{host}{port}/{quote(db['NAME'])}"


class LiveServer:
    """daphne serving the project on a free port of 127.0.0.1."""

    def __init__(self, *, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_DEBUG": "",
            **(env or {}),
        }
        self.process: subprocess.Popen | None = None
        ARTIFACTS.mkdir(exist_ok=True)
        self.log_path = ARTIFACTS / "live-server.log"

    def start(self, timeout: float = 60) -> None:
        self.log = self.log_path.open("w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port),
             "config.asgi:application"],
            cwd=settings.BASE_DIR,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the live server exited; see {self.log_path}")
            try:
                with urllib.request.urlopen(self.url + "/login/", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"the live server did not answer within {timeout}s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if getattr(self, "log", None):
            self.log.close()
