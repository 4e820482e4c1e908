"""The WebSocket origin check on a real daphne: a page of another site cannot open a socket
with the user's session cookie (cross-site WebSocket hijacking); this site's own pages can."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_socket_from_a_foreign_origin_is_refused(live_server_url, staff_user):
    client = Client()
    client.force_login(staff_user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    socket_url = live_server_url.replace("http://", "ws://") + f"/ws/chat/{uuid.uuid4()}/"

    for origin in ("https://evil.example", "http://127.0.0.1.evil.example", "null"):
        with pytest.raises(InvalidStatus) as refused:
            connect(socket_url, additional_headers={"Cookie": cookie, "Origin": origin})
        assert refused.value.response.status_code == 403, origin

    with (
        connect(
            socket_url, additional_headers={"Cookie": cookie, "Origin": live_server_url}
        ) as socket,
        pytest.raises(TimeoutError),
    ):  # accepted, and quiet until asked something
        socket.recv(timeout=0.5)
