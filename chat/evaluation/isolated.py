"""A throwaway database on the same server, so evaluation and benchmarks never touch the
user's data: created and migrated on entry, dropped on exit."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import quote

from django.db import connections


@contextmanager
def isolated_database(prefix: str) -> Iterator[str]:
    """Switch the default connection (in every thread) to a fresh, migrated database."""
    connection = connections["default"]
    old_name = connection.settings_dict["NAME"]
    name = f"{prefix}_{os.getpid()}"
    connection.settings_dict["TEST"] = {**connection.settings_dict.get("TEST", {}), "NAME": name}
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield name
    finally:
        connections.close_all()
        connection.creation.destroy_test_db(old_name, verbosity=0)


def database_url() -> str:
    """The current default database as a postgresql:// URL (for child processes)."""
    s = connections["default"].settings_dict
    auth = quote(s["USER"] or "")
    if s.get("PASSWORD"):
        auth += ":" + quote(s["PASSWORD"])
    host = s.get("HOST") or ""
    if host.startswith("/"):
        return f"postgresql://{auth}@/{s['NAME']}?host={quote(host)}"
    port = f":{s['PORT']}" if s.get("PORT") else ""
    return f"postgresql://{auth}@{host}{port}/{s['NAME']}"
