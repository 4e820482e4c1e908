"""A cursor for the few statements every question runs whose text is fixed and whose planning
costs PostgreSQL more than their execution: the Reader (`knowledge.access.reader_for`) and
the earlier turns (`chat.turns.conversation_turns_before`).

Its parameters are bound by the server (psycopg's extended protocol) and each statement is
prepared on the connection the first time it runs there, so PostgreSQL parses and plans it
once per connection instead of for every question
(docs/decisions/0156-where-a-question-s-cost-stands.md has the figures). Every other statement
keeps Django's client-side binding, never prepared.

Preparing needs a `prepare_threshold` on the connection: settings.DB_PREPARED_STATEMENTS puts
one in the database OPTIONS that no statement reaches by being run, so only this cursor, which
asks, prepares (Django's default, None, turns prepared statements off; its client-side
cursors never prepare). With the setting off, as a connection pooler that cannot keep prepared
statements needs, these statements are still bound by the server, and planned each time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import SimpleNamespace
from typing import Any

import psycopg
from django.db import connection
from django.db.backends.utils import CursorWrapper


class _PreparingCursor(psycopg.Cursor):
    """psycopg's server-binding cursor, asking for every statement to be prepared. `compose`:
    set while Django logs the connection's queries, how it writes a statement with its
    values."""

    compose: Callable[[Any, Any], str] | None = None

    def execute(self, query: Any, params: Any = None, *, prepare: bool | None = None, **kwargs):
        asked = True if prepare is None else prepare
        try:
            return super().execute(query, params, prepare=asked, **kwargs)
        finally:
            if self.compose is not None:
                # Django's query log reads `_query.query`, which psycopg fills only when it
                # binds on the client: the statement with its values, as Django logs its own.
                self._query = SimpleNamespace(query=self.compose(query, params).encode())


@contextmanager
def cursor_prepared() -> Iterator[CursorWrapper]:
    """A cursor of the default connection, wrapped as Django wraps its own (so query logging,
    execute wrappers and database errors behave the same), whose statements are bound by the
    server and prepared on the connection when settings.DB_PREPARED_STATEMENTS is on. Its
    statements take `%s` parameters; each must be one statement (no `;`-joined strings)."""
    connection.close_if_health_check_failed()  # as Django's own `connection.cursor()` does
    connection.ensure_connection()
    connection.validate_thread_sharing()
    with connection.wrap_database_errors:
        raw = _PreparingCursor(connection.connection)
    if connection.queries_logged:
        raw.compose = connection.ops.compose_sql
        cursor = connection.make_debug_cursor(raw)
    else:
        cursor = connection.make_cursor(raw)
    with cursor:
        yield cursor
