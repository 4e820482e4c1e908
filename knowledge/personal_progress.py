"""A personal file's reading, followed from another process
(docs/decisions/0082-personal-file-progress-over-the-socket.md).

The database announces each change of a personal file's status, and its purge, on the
PostgreSQL channel `PROGRESS_CHANNEL` with the file's id (a trigger, migration
`knowledge/0012_personal_file_notify`), whichever process wrote it (the ingestion worker,
usually), when its transaction commits. `personal_file_changes` subscribes to the one
listening connection of the process (of its event loop: `_Listener`), opened by the first
subscriber and closed after the last, which fans each announcement out to every subscriber
(docs/decisions/0148-uploads-and-sockets-with-limits.md: 50 sockets following files hold one
connection, not 50); `personal_files_followable` and `personal_files_settled` decide, by the
one read rule (knowledge/access.py), which files a user may follow and what each has become.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, suppress

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
    """The ids announced on `PROGRESS_CHANNEL`, as the process's listener hands them to one
    subscriber."""

    def __init__(self, queue: asyncio.Queue) -> None:
        self._queue = queue

    async def next(self, *, timeout: float) -> set[int]:
        """The ids of the files changed since the last call, waiting up to `timeout` seconds
        for the first (an empty set when none came). Raises the listener's error
        (psycopg.Error) when its connection was lost."""
        changed: set[int] = set()
        try:
            first = await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return changed
        for item in [first, *_drained(self._queue)]:
            if isinstance(item, BaseException):
                raise item
            changed.add(item)
        return changed


def _drained(queue: asyncio.Queue) -> list:
    items = []
    while not queue.empty():
        items.append(queue.get_nowait())
    return items


def _connection_params() -> dict:
    """The default database's connection parameters for psycopg itself (without what only
    Django's own connections use)."""
    params = connections["default"].get_connection_params()
    for key in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(key, None)
    return params


class _Listener:
    """The one connection listening on `PROGRESS_CHANNEL` for an event loop (a web process
    has one), shared by its subscribers: opened (and LISTEN run) by the first subscription,
    closed when the last one ends. Each announcement is put in every subscriber's queue; a
    lost connection puts its error there, so that each subscriber, seeing it, ends its
    subscription and subscribes again (a new connection)."""

    def __init__(self) -> None:
        self.queues: set[asyncio.Queue] = set()
        self.reading: asyncio.Task | None = None
        self.lock = asyncio.Lock()
        self.connections_opened = 0  # for the tests and the figures

    async def subscribe(self) -> asyncio.Queue:
        """A queue of the ids announced from now on: the LISTEN has taken effect when this
        returns. Raises psycopg.Error when the database is unreachable."""
        queue: asyncio.Queue = asyncio.Queue()
        async with self.lock:
            if self.reading is None or self.reading.done():
                connection = await psycopg.AsyncConnection.connect(
                    **_connection_params(), autocommit=True
                )
                try:
                    await connection.execute(f"LISTEN {PROGRESS_CHANNEL}")
                except BaseException:
                    await connection.close()
                    raise
                self.connections_opened += 1
                self.reading = asyncio.create_task(self._read(connection))
            self.queues.add(queue)
        return queue

    async def unsubscribe(self, queue: asyncio.Queue) -> None:
        async with self.lock:
            self.queues.discard(queue)
            if self.queues or self.reading is None:
                return
            reading, self.reading = self.reading, None
            reading.cancel()
            with suppress(asyncio.CancelledError):
                await reading

    async def _read(self, connection: psycopg.AsyncConnection) -> None:
        try:
            async for notify in connection.notifies():
                if notify.payload.isdigit():
                    for queue in self.queues:
                        queue.put_nowait(int(notify.payload))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the connection is lost: every subscriber is told
            logger.warning("Listening for personal files' progress failed: %s", exc)
            for queue in self.queues:
                queue.put_nowait(exc)
        finally:
            with suppress(Exception):
                await connection.close()


_listeners: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Listener] = (
    weakref.WeakKeyDictionary()
)


def listener() -> _Listener:
    """The listener of the running event loop (made at its first use)."""
    loop = asyncio.get_running_loop()
    if loop not in _listeners:
        _listeners[loop] = _Listener()
    return _listeners[loop]


@asynccontextmanager
async def personal_file_changes() -> AsyncIterator[FileChanges]:
    """Subscribe to the announcements on `PROGRESS_CHANNEL` (the process's one listening
    connection, `listener()`) for the block; what was announced before it is not seen, so
    the caller reads the files' state once inside the block. Raises psycopg.Error when the
    database is unreachable."""
    shared = listener()
    queue = await shared.subscribe()
    try:
        yield FileChanges(queue)
    finally:
        await shared.unsubscribe(queue)
