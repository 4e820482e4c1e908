"""A personal file's time to live (docs/decisions/0083-personal-file-ttl-in-the-admin.md):
the environment's PERSONAL_FILE_TTL unless the admin's *Personal file settings* set one; a change
in the admin applies to the next upload, in the same process, and the file is purged at the
expiry it got."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from knowledge.models import Document, PersonalFileSettings
from knowledge.personal import personal_files_purge_expired

pytestmark = pytest.mark.django_db

OFFER = b"# Offer letter\n\nThe Zanzibarine signing bonus is paid after the probation period.\n"


@pytest.fixture
def media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    settings.TASKS = {"default": {"BACKEND": "django_tasks.backends.dummy.DummyBackend"}}
    settings.PERSONAL_FILE_TTL = 3600
    return settings


def upload(client: Client) -> Document:
    response = client.post("/api/files", {"file": SimpleUploadedFile("offer.md", OFFER)})
    assert response.status_code == 201, response.content
    return Document.objects.get(pk=response.json()["id"])


def lifetime(document: Document) -> timedelta:
    return document.expires_at - document.created_at


def admin_sets(client: Client, hours: str) -> None:
    client.get("/admin/knowledge/personalfilesettings/")  # creates the single row
    response = client.post("/admin/knowledge/personalfilesettings/1/change/", {"ttl_hours": hours})
    assert response.status_code == 302, response.content.decode()[:2000]


def test_an_admin_change_applies_to_the_next_upload_and_empty_gives_the_environment_back(
    media, admin_client, staff_user
):
    owner = Client()
    owner.force_login(staff_user)

    first = upload(owner)
    assert abs(lifetime(first) - timedelta(seconds=3600)) < timedelta(seconds=5)

    admin_sets(admin_client, "3")
    assert PersonalFileSettings.objects.get().ttl_hours == 3
    second = upload(owner)
    assert abs(lifetime(second) - timedelta(hours=3)) < timedelta(seconds=5)
    first.refresh_from_db()  # a file keeps the expiry it was given
    assert abs(lifetime(first) - timedelta(seconds=3600)) < timedelta(seconds=5)
    page = admin_client.get("/admin/knowledge/personalfilesettings/1/change/").content.decode()
    assert "3 hours (set here)" in page

    admin_sets(admin_client, "")
    third = upload(owner)
    assert abs(lifetime(third) - timedelta(seconds=3600)) < timedelta(seconds=5)


def test_the_file_is_purged_at_the_expiry_the_admin_setting_gave_it(
    media, admin_client, staff_user
):
    owner = Client()
    owner.force_login(staff_user)
    admin_sets(admin_client, "2")
    document = upload(owner)
    now = timezone.now()

    assert personal_files_purge_expired(now=now + timedelta(hours=1, minutes=55)) == 0
    assert personal_files_purge_expired(now=now + timedelta(hours=2, minutes=1)) == 1
    document.refresh_from_db()
    assert document.purged_at is not None


def test_the_admin_refuses_a_time_to_live_of_zero(media, admin_client):
    admin_client.get("/admin/knowledge/personalfilesettings/")
    response = admin_client.post(
        "/admin/knowledge/personalfilesettings/1/change/", {"ttl_hours": "0"}
    )
    assert response.status_code == 200
    assert "greater than or equal to 1" in response.content.decode()
    assert PersonalFileSettings.objects.get().ttl_hours is None
