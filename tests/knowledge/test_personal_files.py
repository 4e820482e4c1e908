"""Personal files (docs/decisions/0081-personal-files.md): upload through `POST /api/files`
with the admin's parsers and limits, their status, the per-file and per-user limits, removal,
expiry with an injected clock, vector reuse for the same bytes, and hostile files."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from chat.models import Conversation
from chat.withheld import Withheld, messages_withheld
from knowledge.models import Chunk, Document, Embedding
from knowledge.personal import personal_files_purge_expired
from knowledge.services.lifecycle import documents_purge_expired
from tests.knowledge.test_parser_limits import zip_bomb_docx
from tests.support.conversations import exchange_create

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("task_rows_of_this_test")]

IMMEDIATE = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
OFFER = (
    b"# Offer letter\n\nThe Zanzibarine signing bonus of 7,250 pounds is paid after the "
    b"probation period of six months.\n"
)


_commits = []  # the test's django_capture_on_commit_callbacks (`upload` runs what commits)


@pytest.fixture
def run_tasks(settings, tmp_path, django_capture_on_commit_callbacks):
    """Tasks run at once, when the upload's transaction commits."""
    settings.TASKS = IMMEDIATE
    settings.MEDIA_ROOT = tmp_path
    _commits.append(django_capture_on_commit_callbacks)
    yield settings
    _commits.pop()


@pytest.fixture
def owner_client(staff_user) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


def upload(client: Client, name: str, data: bytes, **fields):
    with _commits[-1](execute=True):
        return client.post("/api/files", {"file": SimpleUploadedFile(name, data), **fields})


def test_an_uploaded_file_is_read_and_ready_with_its_expiry(run_tasks, owner_client, staff_user):
    run_tasks.PERSONAL_FILE_TTL = 3600
    before = timezone.now()

    response = upload(owner_client, "offer.md", OFFER)

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["name"] == "offer.md"
    assert body["size"] == len(OFFER)
    document = Document.objects.get(pk=body["id"])
    assert document.owner == staff_user
    assert document.collection.is_personal
    assert before + timedelta(seconds=3600) <= document.expires_at
    assert document.expires_at <= timezone.now() + timedelta(seconds=3600)
    status = owner_client.get(f"/api/files/{body['id']}").json()
    assert status["status"] == "ready"
    assert Chunk.objects.filter(document=document, text__contains="Zanzibarine").exists()


def test_another_user_can_neither_see_nor_remove_the_file(
    run_tasks, owner_client, other_staff_user
):
    file_id = upload(owner_client, "offer.md", OFFER).json()["id"]
    other = Client()
    other.force_login(other_staff_user)

    assert other.get(f"/api/files/{file_id}").status_code == 404
    assert other.delete(f"/api/files/{file_id}").status_code == 404
    assert owner_client.get(f"/api/files/{file_id}").status_code == 200
    assert Client().get(f"/api/files/{file_id}").status_code == 401


def test_an_upload_into_someone_elses_conversation_is_refused_and_stores_nothing(
    run_tasks, owner_client, other_staff_user
):
    theirs = Conversation.objects.create(owner=other_staff_user, title="Theirs")

    response = upload(owner_client, "offer.md", OFFER, conversation_id=str(theirs.pk))

    assert response.status_code == 403
    assert not Document.objects.filter(owner__isnull=False).exists()


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("tool.exe", b"MZ", "unsupported-type"),
        ("empty.md", b"", "empty"),
        ("big.md", b"x" * 2001, "too-large"),
    ],
)
def test_a_refused_file_gets_a_readable_422_and_nothing_is_stored(
    run_tasks, owner_client, name, data, reason
):
    run_tasks.PERSONAL_FILE_MAX_BYTES = 2000

    response = upload(owner_client, name, data)

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "validation-failed"
    assert error["details"]["reason"] == reason
    assert name in error["message"]
    assert not Document.objects.exists()


def test_the_quota_in_files_and_in_bytes_is_enforced_with_a_clear_message(
    run_tasks, owner_client, staff_user
):
    run_tasks.PERSONAL_FILES_MAX_PER_USER = 2
    run_tasks.PERSONAL_FILES_MAX_BYTES_PER_USER = len(OFFER) * 3
    assert upload(owner_client, "a.md", OFFER).status_code == 201
    assert upload(owner_client, "b.md", OFFER).status_code == 201

    third = upload(owner_client, "c.md", OFFER)

    assert third.status_code == 422
    assert third.json()["error"]["details"]["reason"] == "quota-exceeded"
    assert "limit is 2" in third.json()["error"]["message"]
    # A removed file frees its place; the bytes are counted too.
    first = Document.objects.filter(owner=staff_user).order_by("pk").first()
    assert owner_client.delete(f"/api/files/{first.pk}").status_code == 204
    big = upload(owner_client, "big.md", OFFER * 3)
    assert big.status_code == 422
    assert "over your limit" in big.json()["error"]["message"]
    assert upload(owner_client, "c.md", OFFER).status_code == 201


def test_removing_a_file_purges_its_text_vectors_and_bytes_at_once(
    run_tasks, owner_client, staff_user
):
    file_id = upload(owner_client, "offer.md", OFFER).json()["id"]
    document = Document.objects.get(pk=file_id)
    stored = document.file.path

    with _commits[-1](execute=True):  # the bytes go once the removal commits
        response = owner_client.delete(f"/api/files/{file_id}")

    assert response.status_code == 204
    assert not Chunk.objects.filter(document_id=file_id).exists()
    assert not Embedding.objects.filter(document_id=file_id).exists()
    assert not os.path.exists(stored)
    # Its text gone, the file is not found any more, and removing it again is not found either.
    assert owner_client.get(f"/api/files/{file_id}").status_code == 404
    assert owner_client.delete(f"/api/files/{file_id}").status_code == 404


def test_an_expired_file_is_purged_and_its_answers_keep_their_text_for_the_owner_only(
    run_tasks, owner_client, staff_user, other_staff_user, django_user_model
):
    run_tasks.PERSONAL_FILE_TTL = 60
    conversation = Conversation.objects.create(owner=staff_user, title="Offer")
    file_id = upload(owner_client, "offer.md", OFFER, conversation_id=str(conversation.pk)).json()[
        "id"
    ]
    chunks = list(Chunk.objects.filter(document_id=file_id))
    _, answer = exchange_create(
        conversation, question="Bonus?", answer="Zanzibarine bonus [1]", cited=chunks
    )
    root = django_user_model.objects.create_superuser(username="root2", email="", password=None)

    assert personal_files_purge_expired(now=timezone.now()) == 0  # not yet
    assert personal_files_purge_expired(now=timezone.now() + timedelta(seconds=61)) == 1

    document = Document.objects.get(pk=file_id)
    assert document.purged_at is not None
    assert not Chunk.objects.filter(document_id=file_id).exists()
    assert not Embedding.objects.filter(document_id=file_id).exists()
    assert messages_withheld(user=staff_user, message_ids=[answer.pk]) == {}
    for someone in (other_staff_user, root):
        assert messages_withheld(user=someone, message_ids=[answer.pk]) == {
            answer.pk: Withheld.ACCESS
        }
    # The owner's page keeps the answer (tests/chat/transports/test_attachments.py: and says
    # that the file has expired).
    assert "Zanzibarine bonus" in owner_client.get(f"/c/{conversation.pk}/").content.decode()
    # The organisation's purge leaves the row alone: it knows whose the answer's file was.
    documents_purge_expired(now=timezone.now() + timedelta(days=2))
    assert Document.objects.filter(pk=file_id).exists()


def test_the_same_bytes_uploaded_twice_reuse_their_vectors(run_tasks, owner_client, monkeypatch):
    from knowledge.services import ingest_window

    embedded: list[int] = []
    real = ingest_window.texts_embed

    def counting(texts):
        embedded.append(len(texts))
        return real(texts)

    monkeypatch.setattr(ingest_window, "texts_embed", counting)

    upload(owner_client, "offer.md", OFFER)
    upload(owner_client, "offer-again.md", OFFER)

    assert embedded[0] > 0
    assert sum(embedded[1:]) == 0  # nothing embedded the second time
    assert Embedding.objects.filter(document__owner__isnull=False).count() == 2 * (
        Chunk.objects.filter(document__title="offer.md").count()
    )


def test_a_zip_bomb_fails_with_a_readable_error_like_an_admin_upload(run_tasks, owner_client):
    response = upload(owner_client, "bomb.docx", zip_bomb_docx())

    assert response.status_code == 201
    status = owner_client.get(f"/api/files/{response.json()['id']}").json()
    assert status["status"] == "failed"
    assert status["error"]
    assert not Chunk.objects.exists()


def test_a_script_in_html_is_never_text_of_the_file(run_tasks, owner_client):
    html = (
        b"<html><body><p>The Zanzibarine bonus is paid in March.</p>"
        b"<script>alert('Qwertyuiop')</script></body></html>"
    )

    response = upload(owner_client, "page.html", html)

    texts = " ".join(
        Chunk.objects.filter(document_id=response.json()["id"]).values_list("text", flat=True)
    )
    assert "Zanzibarine" in texts
    assert "Qwertyuiop" not in texts


def test_the_worker_is_given_the_reading_below_the_admins_uploads_and_the_purge_at_expiry(
    settings, tmp_path, owner_client, django_capture_on_commit_callbacks
):
    from django_tasks_db.models import DBTaskResult

    settings.TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
    settings.MEDIA_ROOT = tmp_path
    with django_capture_on_commit_callbacks(execute=True):
        response = owner_client.post("/api/files", {"file": SimpleUploadedFile("offer.md", OFFER)})

    document = Document.objects.get(pk=response.json()["id"])
    assert response.json()["status"] == "pending"
    queued = {task.task_path.rsplit(".", 1)[1]: task for task in DBTaskResult.objects.all()}
    reading = queued["personal_file_process_task"]
    purge = queued["personal_files_purge_task"]
    assert reading.priority < 0  # the admin's uploads (priority 0) are read first
    assert reading.args_kwargs["args"] == [document.pk]
    assert purge.run_after == document.expires_at
