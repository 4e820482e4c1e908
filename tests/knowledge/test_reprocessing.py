"""Re-processing a document keeps its last good version searchable (docs/product.md §3:
readers keep the old version until the new one is committed), and only staff allowed to change
documents may enable, disable or re-process them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from knowledge.access import OPERATOR
from knowledge.models import Chunk, Document
from knowledge.retrieval import chunks_search, searchable_chunks
from knowledge.selectors import document_is_stalled
from knowledge.services import document_ingest, document_process, documents_reprocess, ingest

pytestmark = pytest.mark.django_db

LIST_URL = reverse("admin:knowledge_document_changelist")
DATABASE_TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}

HANDBOOK = """# Bicycle scheme

Every employee who has passed probation may lease a bicycle worth up to 1,500 pounds.
"""
HANDBOOK_V2 = """# Bicycle scheme

Every employee may lease a bicycle worth up to 2,000 pounds, from the first day.
"""


@pytest.fixture
def handbook(tmp_path) -> Document:
    path = tmp_path / "bicycle.md"
    path.write_text(HANDBOOK, encoding="utf-8")
    document = document_ingest(path=path).document
    assert document.status == Document.Status.READY
    return document


def found(document: Document) -> bool:
    """Whether a search for the document's subject retrieves it."""
    result = chunks_search(reader=OPERATOR, query="lease a bicycle", top_k=5)
    return document.pk in {chunk.document_id for chunk in result.chunks}


def test_a_document_queued_for_reprocessing_stays_searchable(
    handbook, settings, django_capture_on_commit_callbacks
):
    settings.TASKS = DATABASE_TASKS  # queued only: no worker runs

    with django_capture_on_commit_callbacks(execute=True):
        assert documents_reprocess(ids=[handbook.pk]) == (1, 0)

    handbook.refresh_from_db()
    assert handbook.status == Document.Status.READY
    assert handbook.reprocessing_since is not None
    assert found(handbook)
    # Queued again while queued: skipped, as for a new document.
    assert documents_reprocess(ids=[handbook.pk]) == (0, 1)


def test_the_old_chunks_stay_searchable_while_the_new_version_is_built(handbook, monkeypatch):
    Path(handbook.source).write_text(HANDBOOK_V2, encoding="utf-8")
    seen_during: list[bool] = []
    real = ingest._jobs_embed

    def embed_and_look(jobs):  # in the middle of processing, before the swap
        seen_during.append(found(handbook))
        return real(jobs)

    monkeypatch.setattr(ingest, "_jobs_embed", embed_and_look)
    outcome = document_process(document=handbook)

    assert seen_during == [True]
    assert outcome.action == "updated"
    handbook.refresh_from_db()
    assert (handbook.status, handbook.error, handbook.reprocessing_since) == ("ready", "", None)
    texts = list(handbook.chunks.values_list("text", flat=True))
    assert any("2,000 pounds" in text for text in texts)
    assert not any("1,500 pounds" in text for text in texts)


def test_a_failed_reparse_keeps_the_last_good_version_and_shows_the_error(handbook):
    before = set(handbook.chunks.values_list("pk", flat=True))
    Path(handbook.source).write_bytes(b"   \n")  # now unparseable

    outcome = document_process(document=handbook)

    assert outcome.action == "failed"
    handbook.refresh_from_db()
    assert handbook.status == Document.Status.READY
    assert handbook.reprocessing_since is None
    assert "empty" in handbook.error
    assert set(searchable_chunks(reader=OPERATOR).values_list("pk", flat=True)) == before
    assert found(handbook)


def test_a_worker_killed_mid_document_leaves_the_previous_version_and_can_be_requeued(
    handbook, monkeypatch, settings, django_capture_on_commit_callbacks
):
    before = list(Chunk.objects.order_by("pk").values_list("pk", "text"))
    Path(handbook.source).write_text(HANDBOOK_V2, encoding="utf-8")

    def killed(*args, **kwargs):
        raise SystemExit("SIGKILL")  # not an Exception: nothing in ingestion catches it

    monkeypatch.setattr(ingest, "_write", killed)
    with pytest.raises(SystemExit):
        document_process(document=handbook)

    handbook.refresh_from_db()
    assert handbook.status == Document.Status.READY
    assert list(Chunk.objects.order_by("pk").values_list("pk", "text")) == before
    assert found(handbook)
    # Still "being re-processed" until it is stalled; then it may be queued again.
    settings.TASKS = DATABASE_TASKS
    assert documents_reprocess(ids=[handbook.pk]) == (0, 1)
    Document.objects.filter(pk=handbook.pk).update(
        reprocessing_since=timezone.now() - timedelta(hours=1)
    )
    handbook.refresh_from_db()
    assert document_is_stalled(handbook)
    with django_capture_on_commit_callbacks(execute=True):
        assert documents_reprocess(ids=[handbook.pk]) == (1, 0)
    monkeypatch.undo()
    document_process(document=handbook)
    handbook.refresh_from_db()
    assert (handbook.status, handbook.reprocessing_since) == ("ready", None)
    assert any("2,000 pounds" in t for t in handbook.chunks.values_list("text", flat=True))


def test_the_admin_list_shows_a_ready_document_being_reprocessed(
    admin_client, handbook, settings, django_capture_on_commit_callbacks
):
    settings.TASKS = DATABASE_TASKS
    with django_capture_on_commit_callbacks(execute=True):
        admin_client.post(
            LIST_URL, {"action": "reprocess_documents", "_selected_action": [handbook.pk]}
        )

    listing = admin_client.get(LIST_URL).content.decode()

    assert "Ready · re-processing" in listing
    assert '<meta http-equiv="refresh"' in listing


# --- Permissions of the actions ---------------------------------------------------------------
@pytest.fixture
def viewer(client, django_user_model):
    """Staff allowed to view documents, not to change them."""
    user = django_user_model.objects.create_user(username="viewer", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_document"))
    client.force_login(user)
    return client


@pytest.mark.parametrize("action", ["enable_documents", "disable_documents", "reprocess_documents"])
def test_staff_who_may_only_view_documents_cannot_run_the_actions(
    viewer, settings, action, django_capture_on_commit_callbacks
):
    settings.TASKS = DATABASE_TASKS
    document = Document.objects.create(
        title="Old", source="/nowhere/old.md", status=Document.Status.FAILED, enabled=False
    )
    before = Document.objects.values().get(pk=document.pk)

    assert viewer.get(LIST_URL).status_code == 200
    assert action not in viewer.get(LIST_URL).content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        viewer.post(LIST_URL, {"action": action, "_selected_action": [document.pk]})

    assert Document.objects.values().get(pk=document.pk) == before
