"""A personal file's reading, followed from another process
(docs/decisions/0082-personal-file-progress-over-the-socket.md).

The database announces each change of a personal file's status, and its purge, on the
PostgreSQL channel `PROGRESS_CHANNEL` with the file's id (a trigger, migration
`knowledge/0012_personal_file_notify`), whichever process wrote it (the ingestion worker,
usually), when its transaction commits. `personal_file_changes` listens there on a connection
of its own; `personal_files_followable` and `personal_files_settled` decide, by the one read rule
(knowledge/access.py), which files a user may follow and what each has become.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager

import psycopg
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connections

from knowledge.access import document_readable, personal_files_filter
from knowledge.models import Document
from knowledge.personal import personal_file_state

logger = logging.getLogger(__name__)

PROGRESS_CHANNEL = "personal_file_status"
# The statuses after which a file's reading is over (expired: purged or past its expiry).
SETTLED = frozenset({"ready", "failed", "expired"})
MAX_FOLLOWED = 20


def personal_files_followable(*, user: AbstractBaseUser, file_ids: Iterable[int]) -> list[int]:
    """Those of `file_ids` (at most MAX_FOLLOWED of them are looked at) that are personal
    files `user` may read, by the one read rule: their own; sorted."""
    wanted = sorted(set(file_ids))[:MAX_FOLLOWED]
    if not wanted or not user.is_authenticated:
        return []
    documents = Document.objects.filter(personal_files_filter(), pk__in=wanted)
    return sorted(d.pk for d in documents if document_readable(user=user, document=d))


def personal_files_settled(*, user: AbstractBaseUser, file_ids: Iterable[int]) -> list[Document]:
    """Those of `file_ids` that `user` may read (their own files) whose reading is over
    (`SETTLED`), by id; a file removed meanwhile is reported expired."""
    ids = personal_files_followable(user=user, file_ids=file_ids)
    documents = Document.objects.filter(pk__in=ids).order_by("pk")
    return [d for d in documents if personal_file_state(d) in SETTLED]


class FileChanges:
    """The ids announced on `PROGRESS_CHANNEL`, read from a listening connection."""

    def __init__(self, connection: psycopg.AsyncConnection) -> None:
        self._connection = connection

    async def next(self, *, timeout: float) -> set[int]:
        """The ids of the files changed since the last call, waiting up to `timeout` seconds
        for the first (an empty set when none came)."""
        changed: set[int] = set()
        async for notify in self._connection.notifies(timeout=timeout, stop_after=1):
            if notify.payload.isdigit():
                changed.add(int(notify.payload))
        return changed


def _connection_params() -> dict:
    """The default database's connection parameters for psycopg itself (without what only
    Django's own connections use)."""
    params = connections["default"].get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)
    return params


@asynccontextmanager
async def personal_file_changes() -> AsyncIterator[FileChanges]:
    """Listen on `PROGRESS_CHANNEL` (a connection of its own, autocommit, closed on exit);
    what was announced before the LISTEN took effect is not seen, so the caller reads the
    files' state once inside the block. Raises psycopg.Error when the database is
    unreachable."""
    connection = await psycopg.AsyncConnection.connect(**_connection_params(), autocommit=True)
    try:
        await connection.execute(f"LISTEN {PROGRESS_CHANNEL}")
        yield FileChanges(connection)
    finally:
        await connection.close()
