"""An open conversation socket reads its session and its user again for each message, and
closes with a clear code once either has gone: 4401 (signed out: session deleted, expired, a
provider sign-in older than OIDC_SESSION_MAX_AGE, user deactivated), 4403 (no longer staff)."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.test import Client

from accounts.sessions import SESSION_ID_TOKEN, SESSION_SIGNED_IN_AT
from tests.support.clients import session_signed_in

pytestmark = pytest.mark.django_db(transaction=True)

UNKNOWN = json.dumps({"action": "dance"})  # answered with a notice: the socket is working


async def closed_with(communicator: WebsocketCommunicator) -> int:
    output = await communicator.receive_output(timeout=10)
    assert output["type"] == "websocket.close", output
    return output["code"]


async def test_a_socket_whose_session_was_deleted_is_closed_on_its_next_message(staff_user):
    """Through the real ASGI stack: the session cookie of a signed-in browser."""
    from config.asgi import application

    client = Client()
    await sync_to_async(client.force_login)(staff_user)
    key = client.cookies["sessionid"].value
    socket = WebsocketCommunicator(
        application,
        f"/ws/chat/{uuid.uuid4()}/",
        headers=[(b"origin", b"http://testserver"), (b"cookie", f"sessionid={key}".encode())],
    )
    connected, _ = await socket.connect()
    assert connected
    await socket.send_to(text_data=UNKNOWN)
    assert "Unknown action" in await socket.receive_from(timeout=10)

    await Session.objects.filter(pk=key).adelete()  # signed out elsewhere, or by an admin
    await socket.send_to(text_data=UNKNOWN)
    assert await closed_with(socket) == 4401
    await socket.disconnect()


def _user_deactivate(user: User) -> None:
    User.objects.filter(pk=user.pk).update(is_active=False)


def _user_unstaff(user: User) -> None:
    User.objects.filter(pk=user.pk).update(is_staff=False)


def _password_change(user: User) -> None:
    user.set_password("a-new-pass-5512")
    user.save()


@pytest.mark.parametrize(
    ("change", "code"),
    [(_user_deactivate, 4401), (_password_change, 4401), (_user_unstaff, 4403)],
)
async def test_a_socket_whose_user_changed_is_closed_on_its_next_message(staff_user, change, code):
    from tests.support.clients import socket_for

    socket = await socket_for(staff_user, uuid.uuid4())
    await socket.send_to(text_data=UNKNOWN)
    assert "Unknown action" in await socket.receive_from(timeout=10)
    await database_sync_to_async(change)(staff_user)
    await socket.send_to(text_data=UNKNOWN)
    assert await closed_with(socket) == code
    await socket.send_to(text_data=UNKNOWN)  # nothing more is answered on a closing socket
    assert await socket.receive_nothing(timeout=0.3)
    await socket.disconnect()


async def test_a_socket_of_a_provider_sign_in_past_its_age_is_closed(staff_user, settings):
    from channels.routing import URLRouter

    from chat.routing import websocket_urlpatterns

    settings.OIDC_SESSION_MAX_AGE = 3600
    session = await database_sync_to_async(session_signed_in)(
        staff_user, **{SESSION_ID_TOKEN: "a.b.c", SESSION_SIGNED_IN_AT: int(time.time()) - 3500}
    )
    socket = WebsocketCommunicator(URLRouter(websocket_urlpatterns), f"/ws/chat/{uuid.uuid4()}/")
    socket.scope["user"], socket.scope["session"] = staff_user, session
    connected, _ = await socket.connect()
    assert connected
    await socket.send_to(text_data=UNKNOWN)
    assert "Unknown action" in await socket.receive_from(timeout=10)
    settings.OIDC_SESSION_MAX_AGE = 3000  # the sign-in is now older than a sign-in lasts
    await socket.send_to(text_data=UNKNOWN)
    assert await closed_with(socket) == 4401
    await socket.disconnect()
