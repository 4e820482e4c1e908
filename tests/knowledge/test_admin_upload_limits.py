"""An admin upload over DOCUMENT_MAX_UPLOAD_BYTES is refused with a readable message before
its body is spooled: at once when the request declares a larger body, else as soon as the file
passes the limit while it is read. The upload form keeps its CSRF protection."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.files.uploadhandler import MemoryFileUploadHandler, TemporaryFileUploadHandler
from django.http.multipartparser import MultiPartParser
from django.test import Client
from django.urls import reverse
from django_tasks_db.models import DBTaskResult

from knowledge.models import Document
from knowledge.uploads import UPLOAD_FORM_ALLOWANCE

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("task_rows_of_this_test")]

ADD_URL = reverse("admin:knowledge_document_add")


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def spooled(monkeypatch) -> list[int]:
    """The bytes Django's own upload handlers (memory, temporary file) were given."""
    given: list[int] = []
    for handler in (MemoryFileUploadHandler, TemporaryFileUploadHandler):
        real = handler.receive_data_chunk

        def spy(self, raw_data, start, real=real):
            given.append(len(raw_data))
            return real(self, raw_data, start)

        monkeypatch.setattr(handler, "receive_data_chunk", spy)
    return given


def upload(client, name: str, data: bytes, **extra):
    payload = {"file": SimpleUploadedFile(name, data), "title": "", "enabled": "on"}
    return client.post(ADD_URL, payload, follow=True, **extra)


def refused(response) -> str:
    text = response.content.decode()
    assert "The file is too large" in text
    assert "the limit is 10.0\xa0KB" in text
    assert not Document.objects.exists()
    assert not DBTaskResult.objects.exists()
    return text


def test_an_upload_declared_over_the_limit_is_refused_before_its_body_is_read(
    admin_client, settings, media_root, monkeypatch, spooled
):
    settings.DOCUMENT_MAX_UPLOAD_BYTES = 10 * 1024
    parsed: list[object] = []
    real_parse = MultiPartParser.parse
    monkeypatch.setattr(MultiPartParser, "parse", lambda self: parsed.append(1) or real_parse(self))

    response = upload(admin_client, "handbook.md", b"# Handbook\n" * 30_000)

    assert response.redirect_chain == [(ADD_URL, 302)]
    text = refused(response)
    assert "(322." in text  # KB: the size the request declared
    assert "Nothing was uploaded." in text
    assert parsed == [] and spooled == []
    assert not media_root.exists() or not any(media_root.rglob("*.md"))


def test_an_upload_whose_file_passes_the_limit_while_read_is_stopped_there(
    admin_client, settings, media_root, spooled
):
    settings.DOCUMENT_MAX_UPLOAD_BYTES = 10 * 1024
    data = b"# Handbook\n" * 3000  # 33 kB: the request is under the limit plus the allowance
    assert len(data) < settings.DOCUMENT_MAX_UPLOAD_BYTES + UPLOAD_FORM_ALLOWANCE

    response = upload(admin_client, "handbook.md", data)

    assert response.redirect_chain == []  # the form again, with its error on the file
    assert "The file is too large" in " ".join(response.context["adminform"].form.errors["file"])
    refused(response)
    assert "(32.2\xa0KB)" in response.content.decode()  # the file's size, read to its end
    assert sum(spooled) <= settings.DOCUMENT_MAX_UPLOAD_BYTES
    assert not media_root.exists() or not any(media_root.rglob("*.md"))


def test_an_upload_under_the_limit_is_saved(admin_client, settings):
    settings.DOCUMENT_MAX_UPLOAD_BYTES = 10 * 1024

    response = upload(admin_client, "handbook.md", b"# Handbook\n\nLeave is 25 days.\n")

    assert response.status_code == 200
    assert Document.objects.get().metadata["original_name"] == "handbook.md"


def test_the_upload_form_still_needs_its_csrf_token(admin_user):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)

    response = client.post(
        ADD_URL, {"file": SimpleUploadedFile("a.md", b"# A\n\nText.\n"), "title": ""}
    )

    assert response.status_code == 403
    assert not Document.objects.exists()
