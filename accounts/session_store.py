"""Django's database sessions (`django.contrib.sessions.backends.db`), with the read of a
session written out as one statement: every page, API call and WebSocket message reads its
session, and the ORM's compiling of that one query cost more CPU than running it
(docs/decisions/0150-answer-cost-per-question.md, "Sixth round"). What is read, when a session
counts as expired and what is stored are Django's own."""

from __future__ import annotations

from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.contrib.sessions.models import Session
from django.db import connections, router
from django.utils import timezone

_SESSION_SQL = (
    "SELECT session_key, session_data, expire_date FROM "  # noqa: S608
    f"{Session._meta.db_table} WHERE session_key = %s AND expire_date > %s"
)


class SessionStore(DatabaseSessionStore):
    def _get_session_from_db(self) -> Session | None:
        """The unexpired session of this key, as the ORM's `get` would find it; None (and no
        key) when there is none."""
        connection = connections[router.db_for_read(self.model)]
        with connection.cursor() as cursor:
            cursor.execute(_SESSION_SQL, [self.session_key, timezone.now()])
            row = cursor.fetchone()
        if row is None:
            self._session_key = None
            return None
        key, data, expires = row
        return self.model(session_key=key, session_data=data, expire_date=expires)
