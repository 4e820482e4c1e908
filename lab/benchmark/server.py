"""A real ASGI server for the benchmark: `python -m config.web` (one or more daphne processes
on one socket, as bin/serve runs it) on 127.0.0.1 (a free port), serving the throwaway
database. Always stopped on the way out, also on Ctrl-C."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import psutil
from django.conf import settings
from django.db import connection

HOST = "127.0.0.1"
READY_TIMEOUT = 120.0
STOP_TIMEOUT = 10.0
LOG_TAIL_LINES = 20


class ServerError(RuntimeError):
    """The server did not start or stopped on its own; the message includes its log."""


@dataclass
class RunningServer:
    process: subprocess.Popen
    port: int
    log_path: Path

    @property
    def http_url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{HOST}:{self.port}"

    @property
    def origin(self) -> str:
        return self.http_url

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise ServerError(
                f"The server exited with status {self.process.returncode}.\n{self.log_tail()}"
            )

    def daphne_pids(self) -> list[int]:
        """The daphne processes (children of the launcher)."""
        try:
            children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
            return [int(pid) for pid in children.read_text().split()]
        except (OSError, ValueError):
            return []

    def peak_rss_mb(self) -> float | None:
        """The sum over the daphne processes of their VmHWM (peak resident memory), in MB
        (an upper bound of the server's peak: each process's own peak, added); None if
        unreadable."""
        peaks = self.peak_rss_mb_each()
        if not peaks or None in peaks:
            return None
        return round(sum(peaks), 1)

    def peak_rss_mb_each(self) -> list[float | None]:
        """Each daphne process's VmHWM, in MB (None where unreadable)."""
        return [_status_kb(pid, "VmHWM") for pid in self.daphne_pids()]

    def cpu_seconds(self) -> float | None:
        """CPU time (user + system) the server's processes have used so far, in seconds."""
        return process_tree_cpu_seconds(self.process.pid)

    def log_tail(self) -> str:
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-LOG_TAIL_LINES:])


def _status_kb(pid: int, field: str) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        return None
    return None


def process_tree_cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system, seconds) used by a process, its live descendants and the
    children it has already waited for (a PostgreSQL server's ended backends); None if the
    process cannot be read."""
    try:
        root = psutil.Process(pid)
        own = root.cpu_times()
        total = own.user + own.system + own.children_user + own.children_system
        for child in root.children(recursive=True):
            try:
                times = child.cpu_times()
            except psutil.Error:
                continue  # ended meanwhile: counted in its parent's children times
            total += times.user + times.system
    except psutil.Error:
        return None
    return total


def database_server_pid() -> int | None:
    """The PostgreSQL server (postmaster) process of the default database connection when it
    runs on this machine and can be read, else None."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        backend = cursor.fetchone()[0]
    try:
        process = psutil.Process(backend)
        if "postgres" not in process.name():
            return None
        return process.ppid()
    except psutil.Error:
        return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


@contextmanager
def server_running(
    *, database_url: str, env: dict[str, str], processes: int = 1
) -> Iterator[RunningServer]:
    """`processes` daphne processes serving config.asgi on a free port of 127.0.0.1, with
    DATABASE_URL and `env` added to this process's environment; waits until it answers HTTP
    (and every process has warmed its model up). Stopped (TERM, then KILL) when the block
    ends, however it ends."""
    port = free_port()
    log = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed below, kept for the error)
        prefix="sourced-bench-server-", suffix=".log", delete=False
    )
    child_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url,
        "DJANGO_ALLOWED_HOSTS": HOST,
        "PYTHONUNBUFFERED": "1",
        **env,
    }
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "config.web",
            "--host",
            HOST,
            "--port",
            str(port),
            "--processes",
            str(processes),
        ],
        cwd=settings.BASE_DIR,
        env=child_env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    server = RunningServer(process=process, port=port, log_path=Path(log.name))
    try:
        _wait_ready(server)
        yield server
    finally:
        _stop(process)
        log.close()
        Path(log.name).unlink(missing_ok=True)


def _wait_ready(server: RunningServer) -> None:
    """Polls the login page, with one HTTP client for every poll, until it answers; ServerError
    when the server dies or does not answer within READY_TIMEOUT."""
    deadline = time.monotonic() + READY_TIMEOUT
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            server.check_alive()
            try:
                client.get(f"{server.http_url}/login/")
                return
            except httpx.TransportError:
                time.sleep(0.2)
    raise ServerError(
        f"The server did not answer within {READY_TIMEOUT:.0f}s.\n{server.log_tail()}"
    )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def database_sessions_end(timeout: float = 5.0) -> None:
    """Wait for other sessions on the current (throwaway) database to end, then terminate any
    left, so that the database can be dropped."""
    sql = (
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid()"
    )
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while True:
            cursor.execute(sql)
            pids = [row[0] for row in cursor.fetchall()]
            if not pids:
                return
            if time.monotonic() > deadline:
                for pid in pids:
                    cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
                return
            time.sleep(0.1)
