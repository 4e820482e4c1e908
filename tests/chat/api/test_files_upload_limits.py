"""`POST /api/files` with limits (docs/decisions/0148-uploads-and-sockets-with-limits.md): a
body declared over the size limit is refused before it is read, each user's uploads are
rate-limited, and the quota holds against parallel uploads of one user."""

from __future__ import annotations

import threading
import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.files.uploadhandler import MemoryFileUploadHandler, TemporaryFileUploadHandler
from django.db import connection
from django.http.multipartparser import MultiPartParser
from django.test import Client

from knowledge import personal
from knowledge.models import Document

OFFER = b"# Offer letter\n\nThe signing bonus of 7,250 pounds is paid after probation.\n"


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def logged_in(user, **options) -> Client:
    client = Client(**options)
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_a_body_declared_over_the_limit_is_refused_before_anything_reads_it(
    staff_user, settings, monkeypatch
):
    """Even the CSRF check of a session's request, which reads the form, never sees it."""
    settings.PERSONAL_FILE_MAX_BYTES = 10 * 1024
    read: list[int] = []
    real_parse = MultiPartParser.parse
    monkeypatch.setattr(MultiPartParser, "parse", lambda self: read.append(1) or real_parse(self))
    client = logged_in(staff_user, enforce_csrf_checks=True)

    response = client.post(
        "/api/files", {"file": SimpleUploadedFile("big.md", b"# Big\n" * 60_000)}
    )

    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "validation-failed"
    assert error["details"]["reason"] == "too-large"
    assert error["message"].startswith("The file is too large (351.7\xa0KB); the limit is 10.0")
    assert read == []
    assert not Document.objects.exists()


@pytest.mark.django_db
def test_a_file_past_the_limit_while_read_is_kept_no_further(staff_user, settings, monkeypatch):
    """A body that declares a size within the allowance: its file is cut at the limit."""
    settings.PERSONAL_FILE_MAX_BYTES = 10 * 1024
    given: list[int] = []
    for handler in (MemoryFileUploadHandler, TemporaryFileUploadHandler):
        real = handler.receive_data_chunk

        def spy(self, raw_data, start, real=real):
            given.append(len(raw_data))
            return real(self, raw_data, start)

        monkeypatch.setattr(handler, "receive_data_chunk", spy)

    response = logged_in(staff_user).post(
        "/api/files", {"file": SimpleUploadedFile("big.md", b"# Big\n" * 6_000)}
    )

    assert response.status_code == 422
    assert response.json()["error"]["details"]["reason"] == "too-large"
    assert sum(given) <= 10 * 1024


@pytest.mark.django_db
def test_uploads_are_rate_limited_per_user(staff_user, other_staff_user, settings):
    settings.FILES_UPLOAD_RATE_LIMIT = "2/m"
    settings.PERSONAL_FILES_MAX_PER_USER = 10
    client = logged_in(staff_user)
    for name in ("a.md", "b.md"):
        assert (
            client.post("/api/files", {"file": SimpleUploadedFile(name, OFFER)}).status_code == 201
        )

    third = client.post("/api/files", {"file": SimpleUploadedFile("c.md", OFFER)})

    assert third.status_code == 429
    assert int(third["Retry-After"]) >= 1
    error = third.json()["error"]
    assert error["code"] == "rate-limited"
    assert error["message"].startswith("You are uploading files faster than the limit allows (2/m)")
    assert Document.objects.filter(owner=staff_user).count() == 2
    other = logged_in(other_staff_user).post(
        "/api/files", {"file": SimpleUploadedFile("d.md", OFFER)}
    )
    assert other.status_code == 201


@pytest.mark.django_db(transaction=True)
def test_parallel_uploads_of_one_user_cannot_pass_the_quota_together(
    staff_user, settings, monkeypatch
):
    """Ten uploads at the same moment against a quota of three files. The usage each one
    reads is held back 0.2 s (what a slow disk does to the file's write), so without a lock
    all ten would read an empty quota."""
    settings.PERSONAL_FILES_MAX_PER_USER = 3
    settings.FILES_UPLOAD_RATE_LIMIT = "100/m"
    real_usage = personal.personal_usage

    def slow_usage(owner):
        usage = real_usage(owner)
        time.sleep(0.2)
        return usage

    monkeypatch.setattr(personal, "personal_usage", slow_usage)
    count = 10
    barrier = threading.Barrier(count)
    statuses: list[int] = []
    errors: list[BaseException] = []

    def one(position: int) -> None:
        try:
            client = logged_in(staff_user)
            barrier.wait(timeout=30)
            response = client.post(
                "/api/files", {"file": SimpleUploadedFile(f"f{position}.md", OFFER)}
            )
            statuses.append(response.status_code)
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert not errors, errors
    assert sorted(statuses) == [201] * 3 + [422] * 7
    assert Document.objects.filter(owner=staff_user).count() == 3
