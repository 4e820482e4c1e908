"""Every SQL statement a piece of code runs, in every thread, and the rows they return: what a
question costs the database and the Python that reads its rows, counted rather than timed."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper


class Statements(list):
    """The statements run (their text, whitespace folded), and `rows`: the rows they returned
    (a cursor's row count after each statement that returns rows)."""

    rows: int = 0
    rows_each: list[int]  # the rows of each statement, in order (0 for one that returns none)
    # Each statement as run: its SQL and parameters (None for BEGIN, COMMIT and ROLLBACK).
    runs: list[tuple[str, object] | None]


@contextmanager
def statements_recorded() -> Iterator[Statements]:
    """Every SQL statement run meanwhile, in any thread ("BEGIN" and "COMMIT"/"ROLLBACK" too:
    an atomic block on a connection in autocommit mode is two more round trips), and the rows
    they returned."""
    recorded = Statements()
    recorded.rows_each = []
    recorded.runs = []
    lock = threading.Lock()
    execute = CursorWrapper._execute_with_wrappers
    commit, rollback = BaseDatabaseWrapper.commit, BaseDatabaseWrapper.rollback
    set_autocommit = BaseDatabaseWrapper.set_autocommit

    def record(text: str) -> None:
        with lock:
            recorded.append(" ".join(text.split()))
            recorded.rows_each.append(0)
            recorded.runs.append(None)

    def recording_execute(self, sql, params, many, executor):
        result = execute(self, sql, params, many, executor)
        rows = self.cursor.rowcount if self.cursor.description is not None else 0
        with lock:
            recorded.append(" ".join(str(sql).split()))
            recorded.rows_each.append(max(rows, 0))
            recorded.rows += max(rows, 0)
            recorded.runs.append((str(sql), params))
        return result

    def recording_set_autocommit(self, autocommit, *args, **kwargs):
        if not autocommit:
            record("BEGIN")
        return set_autocommit(self, autocommit, *args, **kwargs)

    def recording_commit(self):
        record("COMMIT")
        return commit(self)

    def recording_rollback(self):
        record("ROLLBACK")
        return rollback(self)

    CursorWrapper._execute_with_wrappers = recording_execute
    BaseDatabaseWrapper.set_autocommit = recording_set_autocommit
    BaseDatabaseWrapper.commit = recording_commit
    BaseDatabaseWrapper.rollback = recording_rollback
    try:
        yield recorded
    finally:
        CursorWrapper._execute_with_wrappers = execute
        BaseDatabaseWrapper.set_autocommit = set_autocommit
        BaseDatabaseWrapper.commit = commit
        BaseDatabaseWrapper.rollback = rollback


class _Undone(Exception):
    """Raised to roll back the savepoint `rows_read` runs in (and its `SET LOCAL`s)."""


def rows_read(
    sql: str,
    params: object = None,
    *,
    table: str | None = None,
    planner: tuple[str, ...] = ("enable_seqscan = off",),
) -> int | None:
    """How many rows the read-only statement `sql` reads when run again now (of `table` only,
    when given), those its filters drop included: `EXPLAIN ANALYZE` on the default connection,
    with the `planner` settings (by default sequential scans off: small tables would otherwise
    be read whole whatever their indexes) and the `SET`s the string starts with, in a
    savepoint rolled back. None for a statement that writes."""
    from django.db import connection, transaction

    *settings, query = sql.split("; ") if sql.startswith("SET ") else [sql]
    head = query.lstrip().upper()
    if not (head.startswith("SELECT") or head.startswith("(SELECT")) or " FOR UPDATE" in head:
        return None
    plans = []
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            for setting in [*(f"SET LOCAL {one}" for one in planner), *settings]:
                cursor.execute(setting)
            cursor.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) {query}", params)
            plans.append(cursor.fetchone()[0][0])  # psycopg reads the json
            raise _Undone
    except _Undone:
        pass

    def read(node: dict) -> float:
        own = 0.0
        if "Relation Name" in node and table in (None, node["Relation Name"]):
            kept_and_dropped = node["Actual Rows"] + node.get("Rows Removed by Filter", 0)
            own = kept_and_dropped * node["Actual Loops"]
        return own + sum(read(child) for child in node.get("Plans", ()))

    return round(read(plans[0]["Plan"]))
