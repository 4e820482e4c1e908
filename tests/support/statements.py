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


@contextmanager
def statements_recorded() -> Iterator[Statements]:
    """Every SQL statement run meanwhile, in any thread ("BEGIN" and "COMMIT"/"ROLLBACK" too:
    an atomic block on a connection in autocommit mode is two more round trips), and the rows
    they returned."""
    recorded = Statements()
    recorded.rows_each = []
    lock = threading.Lock()
    execute = CursorWrapper._execute_with_wrappers
    commit, rollback = BaseDatabaseWrapper.commit, BaseDatabaseWrapper.rollback
    set_autocommit = BaseDatabaseWrapper.set_autocommit

    def record(text: str) -> None:
        with lock:
            recorded.append(" ".join(text.split()))
            recorded.rows_each.append(0)

    def recording_execute(self, sql, params, many, executor):
        result = execute(self, sql, params, many, executor)
        rows = self.cursor.rowcount if self.cursor.description is not None else 0
        with lock:
            recorded.append(" ".join(str(sql).split()))
            recorded.rows_each.append(max(rows, 0))
            recorded.rows += max(rows, 0)
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
