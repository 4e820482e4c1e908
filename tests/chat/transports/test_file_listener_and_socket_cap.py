"""One LISTEN connection per web process, fanned out to the sockets that follow personal files,
and a cap on one user's sockets (docs/decisions/0148-uploads-and-sockets-with-limits.md):
50 sockets following one file hold one database connection, all 50 receive its chip when the
worker's write is announced, and the connection is gone once they close; a socket beyond
WS_MAX_SOCKETS_PER_USER is closed with 4429."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest
from channels.db import database_sync_to_async
from channels.routing import URLRouter
from channels.testing import WebsocketCommunicator
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from chat.routing import websocket_urlpatterns
from chat.socket_limits import CLOSE_TOO_MANY_SOCKETS, sockets_open
from knowledge.models import Document
from knowledge.personal import personal_file_upload
from knowledge.personal_progress import PROGRESS_CHANNEL, listener
from tests.support.clients import socket_for

pytestmark = [pytest.mark.django_db(transaction=True)]

OFFER = b"# Offer\n\nThe signing bonus of 7,250 pounds is paid after probation.\n"


def _owner_and_file():
    from django.contrib.auth import get_user_model

    owner = get_user_model().objects.create_user(
        username=f"owner-{uuid.uuid4().hex[:6]}", is_staff=True
    )
    document = personal_file_upload(owner=owner, upload=SimpleUploadedFile("offer.md", OFFER))
    return owner, document


def _listening_connections() -> int:
    """Connections to this database listening on the channel (their last statement)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND query = %s",
            [f"LISTEN {PROGRESS_CHANNEL}"],
        )
        return cursor.fetchone()[0]


async def _until(check, *, timeout: float = 30.0) -> None:
    """Wait until `check()` (a function or a coroutine function) is true."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not (await value if asyncio.iscoroutine(value := check()) else value):
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_fifty_sockets_following_one_file_hold_one_database_connection(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    settings.WS_MAX_SOCKETS_PER_USER = 60
    owner, document = await database_sync_to_async(_owner_and_file)()
    sockets = [await socket_for(owner, uuid.uuid4()) for _ in range(50)]
    try:
        for socket in sockets:
            await socket.send_to(
                text_data=json.dumps({"action": "files", "file_ids": [document.pk]})
            )
        shared = listener()
        await _until(lambda: len(shared.queues) == 50)
        assert await database_sync_to_async(_listening_connections)() == 1
        assert shared.connections_opened == 1

        await database_sync_to_async(
            lambda: Document.objects.filter(pk=document.pk).update(status=Document.Status.READY)
        )()
        for socket in sockets:
            frame = await socket.receive_from(timeout=30)
            assert f'id="file-{document.pk}"' in frame and 'data-file-status="ready"' in frame
    finally:
        for socket in sockets:
            await socket.disconnect()
    await _until(lambda: not listener().queues)
    await _until(database_sync_to_async(lambda: _listening_connections() == 0))


async def test_a_socket_beyond_the_cap_is_closed_with_4429_and_a_place_freed_is_taken(
    settings, staff_user, other_staff_user
):
    settings.WS_MAX_SOCKETS_PER_USER = 3
    held = [await socket_for(staff_user, uuid.uuid4()) for _ in range(3)]
    try:
        extra = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/chat/{uuid.uuid4()}/")
        extra.scope["user"] = staff_user
        connected, _ = await extra.connect()
        assert connected  # accepted, then closed with the code the page shows as final
        closed = await extra.receive_output(timeout=5)
        assert closed == {"type": "websocket.close", "code": CLOSE_TOO_MANY_SOCKETS}
        await extra.wait()
        assert sockets_open(staff_user.pk) == 3

        other = await socket_for(other_staff_user, uuid.uuid4())  # the cap is per user
        await other.disconnect()

        await held.pop().disconnect()
        await _until(lambda: sockets_open(staff_user.pk) == 2)
        held.append(await socket_for(staff_user, uuid.uuid4()))
        assert await held[-1].receive_nothing(timeout=0.5)
    finally:
        for socket in held:
            await socket.disconnect()
    assert sockets_open(staff_user.pk) == 0
