"""A throwaway database on the same server, so evaluation and benchmarks never touch the
user's data: created and migrated on entry, dropped on exit
(docs/decisions/0056-evaluate-and-bench-throwaway-database.md).

When the environment names a migrated database to copy (`ISOLATED_DATABASE_TEMPLATE`, set by
the test suite to a copy of its freshly migrated test database), the throwaway database is
made from it by PostgreSQL (`CREATE DATABASE … TEMPLATE`), a file copy, instead of running
every migration again."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stdout
from urllib.parse import quote

from django.db import connections


@contextmanager
def isolated_database(prefix: str) -> Iterator[str]:
    """Switch the default connection to a fresh, migrated database: the settings are shared by
    every thread, so any connection opened inside the block (this thread's, a worker's, a
    server started with `database_url()`) uses it. Connections other threads already hold stay
    where they are: enter from a thread that runs the work itself (a management command)."""
    connection = connections["default"]
    old_name = connection.settings_dict["NAME"]
    old_test = connection.settings_dict.get("TEST", {})
    name = f"{prefix}_{os.getpid()}"
    connection.settings_dict["TEST"] = {**old_test, "NAME": name}
    template = os.environ.get("ISOLATED_DATABASE_TEMPLATE", "")
    if template:
        database_copy(template, name)
    else:
        # createcachetable prints "already exists" for the cache migration's table: not news.
        with redirect_stdout(io.StringIO()):
            connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield name
    finally:
        connections.close_all()
        connection.creation.destroy_test_db(old_name, verbosity=0)
        connection.settings_dict["TEST"] = old_test


def database_copy(source: str, name: str) -> None:
    """Make database `name` (dropped first if it exists) a copy of `source`, which no session
    may be connected to, and point the default connection at it."""
    connection = connections["default"]
    quote = connection.ops.quote_name
    connection.close()
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quote(name)}")
        cursor.execute(f"CREATE DATABASE {quote(name)} TEMPLATE {quote(source)}")
    connection.settings_dict["NAME"] = name


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
