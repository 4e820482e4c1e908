"""A personal file's reading followed over the conversation's WebSocket
(docs/decisions/0082-personal-file-progress-over-the-socket.md): the page names the files it
waits for (`{"action": "files", "file_ids": [...]}`); when the worker — here
`manage.py ingest_worker`, another process on the test database — has read one, the owner's
socket receives its chip, ready or with the error; another user's socket, asking for the same
ids, receives nothing."""

from __future__ import annotations

import json
import uuid

import pytest
from channels.db import database_sync_to_async
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from knowledge.models import Document
from knowledge.personal import personal_file_upload
from tests.support.clients import socket_for
from tests.support.live_server import database_url_of, ingest_worker

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

OFFER = b"# Offer\n\nThe Zanzibarine signing bonus of 7,250 pounds is paid after probation.\n"
NOT_A_PDF = b"this is not a PDF at all"


@pytest.fixture
def files(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    return tmp_path


def _setup() -> dict:
    from django.contrib.auth import get_user_model

    users = get_user_model().objects
    owner = users.create_user(username=f"owner-{uuid.uuid4().hex[:6]}", is_staff=True)
    other = users.create_user(username=f"other-{uuid.uuid4().hex[:6]}", is_staff=True)
    root = users.create_superuser(username=f"root-{uuid.uuid4().hex[:6]}", email="")
    good = personal_file_upload(owner=owner, upload=SimpleUploadedFile("offer.md", OFFER))
    bad = personal_file_upload(owner=owner, upload=SimpleUploadedFile("scan.pdf", NOT_A_PDF))
    return {"owner": owner, "other": other, "root": root, "good": good, "bad": bad}


def follow(*ids: int) -> str:
    return json.dumps({"action": "files", "file_ids": list(ids)})


async def test_the_owners_socket_receives_ready_and_error_chips_and_nobody_else_anything(files):
    shared = await database_sync_to_async(_setup)()
    good, bad = shared["good"].pk, shared["bad"].pk
    owner = await socket_for(shared["owner"], uuid.uuid4())  # a new conversation
    others = [await socket_for(shared[who], uuid.uuid4()) for who in ("other", "root")]
    try:
        await owner.send_to(text_data=follow(good, bad))
        for socket in others:
            await socket.send_to(text_data=follow(good, bad))
        assert await owner.receive_nothing(timeout=1.0)  # both still waiting to be read

        frames: list[str] = []
        with ingest_worker(
            database_url_of(connection.settings_dict), env={"MEDIA_ROOT": str(files)}
        ):
            while not (
                f'id="file-{good}"' in "".join(frames) and f'id="file-{bad}"' in "".join(frames)
            ):
                frames.append(await owner.receive_from(timeout=120))
        text = "".join(frames)

        good_chip = text[text.index(f'id="file-{good}"') :]
        assert 'data-file-status="ready"' in good_chip.split("</li>")[0]
        assert f'<input type="hidden" name="file_ids" value="{good}"' in good_chip.split("</li>")[0]
        bad_chip = text[text.index(f'id="file-{bad}"') :].split("</li>")[0]
        assert 'data-file-status="failed"' in bad_chip
        assert 'name="file_ids"' not in bad_chip
        assert 'hx-swap-oob="outerHTML"' in bad_chip
        assert (
            await database_sync_to_async(lambda: Document.objects.get(pk=bad).status)() == "failed"
        )
        for socket in others:
            assert await socket.receive_nothing(timeout=0.5)
    finally:
        for socket in [owner, *others]:
            await socket.disconnect()


async def test_a_file_already_read_is_sent_at_once_and_someone_elses_ids_are_ignored(files):
    shared = await database_sync_to_async(_setup)()
    good = shared["good"]
    await database_sync_to_async(
        lambda: Document.objects.filter(pk=good.pk).update(status=Document.Status.READY)
    )()
    owner = await socket_for(shared["owner"], uuid.uuid4())
    other = await socket_for(shared["other"], uuid.uuid4())
    try:
        await other.send_to(text_data=follow(good.pk))
        await other.send_to(text_data=json.dumps({"action": "files", "file_ids": "x"}))
        await owner.send_to(text_data=follow(good.pk))
        frame = await owner.receive_from(timeout=10)
        assert f'id="file-{good.pk}"' in frame and 'data-file-status="ready"' in frame
        assert await other.receive_nothing(timeout=0.5)
    finally:
        await owner.disconnect()
        await other.disconnect()
