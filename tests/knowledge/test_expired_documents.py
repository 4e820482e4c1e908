"""An expired document is withdrawn (knowledge/access.py) from the moment it expires, before
`purge_expired` deletes it: its page and original file open only for staff who manage
documents, and its words leave the vocabulary and the knowledge base's fingerprint, so the
evidence calibration measured with them is no longer current and is measured again."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from chat.calibration import calibration_is_current, calibration_refresh
from chat.tasks import evidence_calibrate_task
from knowledge.access import OPERATOR, reader_of_all_staff
from knowledge.models import Document
from knowledge.services import document_ingest
from knowledge.vocabulary import knowledge_base_fingerprint, vocabulary_build, vocabulary_scope
from tests.support.knowledge_base import (
    EXPENSES_TEXTS,
    LEAVE_TEXTS,
    SECURITY_TEXTS,
    document_create,
)

pytestmark = pytest.mark.django_db

GUIDE = "Kayaks may be borrowed from the boathouse on Fridays after the safety briefing.\n"


def expire(document: Document) -> None:
    Document.objects.filter(pk=document.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


@pytest.fixture
def guide(tmp_path) -> Document:
    path = tmp_path / "kayak-guide.txt"
    path.write_text(GUIDE, encoding="utf-8")
    return document_ingest(path=path).document


@pytest.fixture
def manager(django_user_model):
    user = django_user_model.objects.create_user(username="manager", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_document"))
    return user


@pytest.mark.parametrize("name", ["knowledge:document", "knowledge:document_file"])
def test_an_expired_document_opens_only_for_those_who_manage_documents(
    client, guide, staff_user, manager, name
):
    url = reverse(name, kwargs={"pk": guide.pk})
    client.force_login(staff_user)
    assert client.get(url).status_code == 200  # not expired yet

    expire(guide)

    response = client.get(url)
    assert response.status_code == 404
    assert b"Kayaks" not in b"".join(getattr(response, "streaming_content", [response.content]))
    client.force_login(manager)
    assert client.get(url).status_code == 200


def test_an_expired_document_leaves_the_vocabulary_and_the_fingerprint(guide):
    before = knowledge_base_fingerprint()
    assert vocabulary_build().knows("kayak")

    expire(guide)

    assert knowledge_base_fingerprint() != before
    assert not vocabulary_build().knows("kayak")
    scope = vocabulary_scope(reader_of_all_staff())
    assert not vocabulary_build(scope=scope).knows("kayak")
    assert vocabulary_build(scope=vocabulary_scope(OPERATOR)).chunk_count == 0


@pytest.mark.slow
def test_a_document_expiring_makes_the_calibration_run_again(guide):
    for title, texts in [("Leave", LEAVE_TEXTS), ("Expenses", EXPENSES_TEXTS)]:
        document_create(title=title, texts=texts)
    document_create(title="Security", texts=SECURITY_TEXTS)
    row = calibration_refresh()
    assert calibration_is_current(row)
    assert evidence_calibrate_task.call() == "unchanged"

    expire(guide)  # nothing else happens: no save, no signal

    assert not calibration_is_current(row)
    assert evidence_calibrate_task.call() == "updated"
