"""The document admin: upload with background processing, status, actions, read-only chunks."""

from __future__ import annotations

import re
import signal
from datetime import timedelta
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from chat.models import EvidenceCalibration
from knowledge.access import OPERATOR
from knowledge.models import Chunk, Document
from knowledge.retrieval import chunks_search
from tests.support.knowledge_base import document_create

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("task_rows_of_this_test")]

IMMEDIATE = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
DATABASE = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
ADD_URL = reverse("admin:knowledge_document_add")
LIST_URL = reverse("admin:knowledge_document_changelist")
CHUNKS_URL = reverse("admin:knowledge_chunk_changelist")

POLICY_MD = b"""# Bicycle Scheme

## Eligibility

Every employee who has passed probation may join the cycle-to-work scheme and lease a
bicycle worth up to 1,500 pounds through salary sacrifice.

## Repayments

Repayments are spread over twelve months and stop if you leave the company.
"""


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


@pytest.fixture
def immediate_tasks(settings):
    """Background tasks run in the request, right after the transaction commits."""
    settings.TASKS = IMMEDIATE


def upload(client, name: str, data: bytes, **fields):
    payload = {"file": SimpleUploadedFile(name, data), "title": "", "enabled": "on", **fields}
    return client.post(ADD_URL, payload)


def stored_files(media_root) -> list:
    return [path for path in media_root.rglob("*") if path.is_file()] if media_root.exists() else []


def run_action(client, action: str, documents: list[Document]):
    return client.post(
        LIST_URL,
        {"action": action, "_selected_action": [str(doc.pk) for doc in documents]},
        follow=True,
    )


def test_upload_is_processed_in_the_background_until_ready_with_chunks(
    admin_client, admin_user, immediate_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = upload(admin_client, "bicycle-scheme.md", POLICY_MD)

    assert response.status_code == 302
    assert response["Location"] == LIST_URL
    # Processing was queued after the upload committed; writing the document then queued the
    # evidence calibration (chat/calibration.py), which measured the new knowledge base.
    assert len(callbacks) == 2
    document = Document.objects.get()
    assert document.status == Document.Status.READY, document.error
    assert EvidenceCalibration.objects.filter(pk=1).exists()
    assert document.title == "Bicycle Scheme"  # the document's own heading
    assert document.uploaded_by == admin_user
    assert document.source.startswith("upload:") and document.source.endswith("/bicycle-scheme.md")
    assert document.media_type == "text/markdown"
    assert document.file.name.endswith("/bicycle-scheme.md")
    sections = set(document.chunks.values_list("section", flat=True))
    assert sections == {"Bicycle Scheme > Eligibility", "Bicycle Scheme > Repayments"}
    result = chunks_search(reader=OPERATOR, query="how much can a leased bicycle cost", top_k=1)
    assert result.chunks[0].document_id == document.pk


def test_upload_returns_at_once_and_the_database_worker_processes_it(
    admin_client, settings, transactional_db
):
    settings.TASKS = DATABASE

    response = upload(admin_client, "bicycle-scheme.md", POLICY_MD, title="Cycle to work")

    assert response.status_code == 302
    document = Document.objects.get()
    assert document.status == Document.Status.PENDING
    assert document.title == "Cycle to work"
    assert not document.chunks.exists()
    # Only the document's own task counts: a task another test's process committed (the demo's
    # calibration) may be queued too, and the worker below runs it alike.
    task = DBTaskResult.objects.get(task_path="knowledge.tasks.document_process_task")
    assert task.args_kwargs["args"] == [document.pk]
    listing = admin_client.get(LIST_URL).content.decode()
    assert '<meta http-equiv="refresh"' in listing
    assert "document-status-pending" in listing

    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        call_command("db_worker", "--batch", "--no-startup-delay", "--no-reload", stdout=StringIO())
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)

    document.refresh_from_db()
    assert document.status == Document.Status.READY, document.error
    assert document.title == "Cycle to work"  # an explicit title is kept
    assert document.chunks.count() == 2
    listing = admin_client.get(LIST_URL).content.decode()
    assert '<meta http-equiv="refresh"' not in listing
    assert "document-status-ready" in listing


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("payroll.exe", b"MZ\x90\x00binary", "Unsupported file type"),
        ("notes", b"plain words", "Unsupported file type"),
        ("sheet.xls", b"PK\x03\x04", "Supported types: .pdf"),
    ],
)
def test_upload_of_an_unsupported_type_is_a_form_error_and_saves_nothing(
    admin_client, media_root, name, data, message
):
    response = upload(admin_client, name, data)

    assert response.status_code == 200
    errors = response.context["adminform"].form.errors["file"]
    assert any(message in error for error in errors)
    assert message in response.content.decode()
    assert not Document.objects.exists()
    assert not DBTaskResult.objects.exists()
    assert stored_files(media_root) == []


def test_upload_over_the_size_limit_is_a_form_error(admin_client, settings, media_root):
    settings.DOCUMENT_MAX_UPLOAD_BYTES = 100

    response = upload(admin_client, "bicycle-scheme.md", POLICY_MD)

    assert response.status_code == 200
    assert "too large" in " ".join(response.context["adminform"].form.errors["file"])
    assert not Document.objects.exists()
    assert stored_files(media_root) == []


def test_upload_without_a_file_is_a_form_error(admin_client):
    response = admin_client.post(ADD_URL, {"title": "Nothing", "enabled": "on"})

    assert response.status_code == 200
    assert "file" in response.context["adminform"].form.errors
    assert not Document.objects.exists()


def test_failed_processing_shows_the_error_in_the_list_and_on_the_document(
    admin_client, immediate_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        upload(admin_client, "expenses.pdf", b"%PDF-1.4 this is not really a PDF")

    document = Document.objects.get()
    assert document.status == Document.Status.FAILED
    assert document.error
    listing = admin_client.get(LIST_URL).content.decode()
    assert "document-status-failed" in listing
    assert document.error[:40] in listing.replace("&#x27;", "'")
    page = admin_client.get(reverse("admin:knowledge_document_change", args=[document.pk]))
    assert document.error[:40] in page.content.decode().replace("&#x27;", "'")


def test_enable_and_disable_actions_switch_whether_a_document_is_cited(admin_client):
    handbook = document_create(title="Handbook", texts=["Annual leave is 25 days."])
    other = document_create(title="Other", texts=["Hotels are booked centrally."])

    response = run_action(admin_client, "disable_documents", [handbook])

    assert "1 document(s) disabled." in response.content.decode()
    handbook.refresh_from_db()
    other.refresh_from_db()
    assert not handbook.enabled and other.enabled
    assert handbook.pk not in {
        c.document_id for c in chunks_search(reader=OPERATOR, query="leave").chunks
    }

    response = run_action(admin_client, "enable_documents", [handbook, other])

    assert "1 document(s) enabled." in response.content.decode()
    handbook.refresh_from_db()
    assert handbook.enabled
    assert (
        chunks_search(reader=OPERATOR, query="annual leave", top_k=1).chunks[0].document_id
        == handbook.pk
    )


def test_reprocess_action_queues_documents_and_skips_those_in_progress(
    admin_client, settings, django_capture_on_commit_callbacks
):
    settings.TASKS = DATABASE
    failed = Document.objects.create(
        title="Broken", source="/nowhere/broken.md", media_type="text/markdown", status="failed"
    )
    busy = Document.objects.create(
        title="Busy", source="/nowhere/busy.md", media_type="text/markdown", status="processing"
    )

    with django_capture_on_commit_callbacks(execute=True):
        response = run_action(admin_client, "reprocess_documents", [failed, busy])

    content = response.content.decode()
    assert "1 document(s) queued for processing." in content
    assert "1 document(s) skipped" in content
    failed.refresh_from_db()
    busy.refresh_from_db()
    assert (failed.status, failed.error) == (Document.Status.PENDING, "")
    assert busy.status == Document.Status.PROCESSING
    assert [task.args_kwargs["args"] for task in DBTaskResult.objects.all()] == [[failed.pk]]


def test_reprocess_action_rebuilds_an_uploaded_document(
    admin_client, immediate_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        upload(admin_client, "bicycle-scheme.md", POLICY_MD)
    document = Document.objects.get()
    Chunk.objects.filter(document=document).delete()
    Document.objects.filter(pk=document.pk).update(status=Document.Status.FAILED, error="x")

    with django_capture_on_commit_callbacks(execute=True):
        run_action(admin_client, "reprocess_documents", [document])

    document.refresh_from_db()
    assert document.status == Document.Status.READY
    assert document.chunks.count() == 2


def test_a_stalled_document_stops_the_refresh_and_can_be_queued_again(
    admin_client, settings, django_capture_on_commit_callbacks
):
    settings.TASKS = DATABASE
    stalled = Document.objects.create(
        title="Stalled",
        source="/nowhere/stalled.md",
        media_type="text/markdown",
        status="processing",
    )
    Document.objects.filter(pk=stalled.pk).update(updated_at=timezone.now() - timedelta(hours=1))

    listing = admin_client.get(LIST_URL).content.decode()

    assert '<meta http-equiv="refresh"' not in listing
    assert "is the ingestion worker running" in listing
    with django_capture_on_commit_callbacks(execute=True):
        run_action(admin_client, "reprocess_documents", [stalled])
    stalled.refresh_from_db()
    assert stalled.status == Document.Status.PENDING
    assert [task.args_kwargs["args"] for task in DBTaskResult.objects.all()] == [[stalled.pk]]
    assert '<meta http-equiv="refresh"' in admin_client.get(LIST_URL).content.decode()


def test_document_list_counts_chunks_without_a_query_per_document(
    admin_client, django_assert_max_num_queries
):
    for number in range(2):
        document_create(title=f"Doc {number}", texts=["one.", "two.", "three."])
    with django_assert_max_num_queries(50) as few:
        admin_client.get(LIST_URL)
    for number in range(2, 8):
        document_create(title=f"Doc {number}", texts=["one.", "two.", "three."])

    with django_assert_max_num_queries(len(few.captured_queries)):
        response = admin_client.get(LIST_URL)

    content = response.content.decode()
    assert content.count('<td class="field-chunk_count">3</td>') == 8


def test_document_list_escapes_document_text(admin_client):
    document_create(
        title="<script>alert(1)</script> policy",
        texts=["<img src=x onerror=alert(2)> is not markup here."],
        status=Document.Status.FAILED,
    )
    Document.objects.update(error="<b>broken</b> <script>alert(3)</script>")

    listing = admin_client.get(LIST_URL).content.decode()
    chunks = admin_client.get(CHUNKS_URL).content.decode()

    assert "<script>alert(" not in listing
    assert "&lt;script&gt;alert(1)&lt;/script&gt; policy" in listing
    assert "&lt;script&gt;alert(3)" in listing
    assert "<img src=x" not in chunks
    assert "&lt;img src=x onerror=alert(2)&gt;" in chunks


def test_chunks_are_readable_but_never_editable(admin_client):
    document = document_create(
        title="Handbook",
        texts=["Annual leave is 25 days.", "Carry over up to <5> days."],
        sections=["Handbook > Annual leave", "Handbook > Carry-over"],
    )
    chunk = document.chunks.get(index=1)
    change_url = reverse("admin:knowledge_chunk_change", args=[chunk.pk])

    listing = admin_client.get(CHUNKS_URL, {"document__id__exact": document.pk})
    page = admin_client.get(change_url)

    assert listing.status_code == 200
    assert "Handbook &gt; Carry-over" in listing.content.decode()
    assert page.status_code == 200
    content = page.content.decode()
    assert "Carry over up to &lt;5&gt; days." in content
    assert 'name="_save"' not in content
    delete_url = reverse("admin:knowledge_chunk_delete", args=[chunk.pk])
    assert delete_url not in content
    assert not re.search(r'<textarea[^>]*name="text"', content)
    assert admin_client.post(change_url, {"text": "edited"}).status_code == 403
    assert admin_client.get(reverse("admin:knowledge_chunk_add")).status_code == 403
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 403
    chunk.refresh_from_db()
    assert chunk.text == "Carry over up to <5> days."


def test_document_page_links_to_its_chunks(admin_client):
    document = document_create(title="Handbook", texts=["One.", "Two.", "Three."])

    page = admin_client.get(reverse("admin:knowledge_document_change", args=[document.pk]))

    url = f"{CHUNKS_URL}?document__id__exact={document.pk}"
    assert f'href="{url}"' in page.content.decode().replace("&amp;", "&")
    assert "View the 3 chunks" in page.content.decode()


def test_deleting_a_document_removes_its_chunks_and_stored_file(
    admin_client, immediate_tasks, media_root, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        upload(admin_client, "bicycle-scheme.md", POLICY_MD)
    uploaded = Document.objects.get()
    other = document_create(title="Other", texts=["Hotels are booked centrally."])
    assert len(stored_files(media_root)) == 1

    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            LIST_URL,
            {"action": "delete_selected", "_selected_action": [uploaded.pk], "post": "yes"},
        )

    assert response.status_code == 302
    assert list(Document.objects.all()) == [other]
    assert not Chunk.objects.filter(document_id=uploaded.pk).exists()
    assert stored_files(media_root) == []

    delete_url = reverse("admin:knowledge_document_delete", args=[other.pk])
    assert admin_client.post(delete_url, {"post": "yes"}).status_code == 302
    assert not Document.objects.exists() and not Chunk.objects.exists()


def test_document_admin_is_for_staff_with_permission_only(client, staff_user):
    client.force_login(staff_user)  # staff, but no knowledge permissions

    assert client.get(LIST_URL).status_code == 403
    assert client.get(CHUNKS_URL).status_code == 403


def test_the_document_list_and_page_name_types_in_peoples_words(admin_client):
    """ "Word document" and "PDF", not MIME types: in the list, its filter and the pages."""
    word = document_create(
        title="Onboarding guide",
        texts=["New starters meet their buddy on the first morning."],
        media_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    )
    document_create(
        title="Travel policy",
        texts=["Trains are booked in standard class."],
        media_type="application/pdf",
    )
    listing = admin_client.get(LIST_URL).content.decode()
    assert "Word document" in listing and "PDF" in listing
    assert "wordprocessingml" not in re.sub(r'href="[^"]*"', "", listing)  # but in the filter
    filtered = admin_client.get(LIST_URL, {"kind": word.media_type}).content.decode()
    assert "Onboarding guide" in filtered and "Travel policy" not in filtered
    change = reverse("admin:knowledge_document_change", args=[word.pk])
    assert "Word document" in admin_client.get(change).content.decode()
    page = admin_client.get(reverse("knowledge:document", args=[word.pk])).content.decode()
    assert ">Word document</span>" in page
