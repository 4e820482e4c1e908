"""`manage.py ingest` and `manage.py reindex`: summaries, exit status, clear errors."""

from __future__ import annotations

import os
import subprocess
import sys
from io import StringIO
from urllib.parse import quote

import pytest
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.models.signals import post_save

from knowledge import embedding
from knowledge.access import documents_readable
from knowledge.chunking import CHUNKER_VERSION
from knowledge.collections import collection_create, collection_default
from knowledge.models import Chunk, Document, Embedding
from knowledge.sentences import text_hash

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def run_failing(*args: str) -> tuple[CommandError, str]:
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command(*args, stdout=out, stderr=StringIO())
    return caught.value, out.getvalue()


def manage(*args: str) -> subprocess.CompletedProcess:
    """`python manage.py ...` in a real process, pointed at the test database."""
    db = connection.settings_dict
    credentials = quote(db["USER"]) + (f":{quote(db['PASSWORD'])}" if db["PASSWORD"] else "")
    port = f":{db['PORT']}" if db["PORT"] else ""
    if db["HOST"].startswith("/"):
        url = f"postgresql://{credentials}@{port}/{db['NAME']}?host={quote(db['HOST'])}"
    else:
        url = f"postgresql://{credentials}@{db['HOST']}{port}/{db['NAME']}"
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DATABASE_URL": url},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_ingest_prints_a_summary_and_succeeds(documents_dir):
    output = run("ingest", str(documents_dir))

    assert "Ingested 5 file(s)" in output
    assert "5 new, 0 updated, 0 unchanged, 0 failed" in output
    assert "chunks/s" in output
    assert Document.objects.filter(status=Document.Status.READY).count() == 5

    again = run("ingest", str(documents_dir))
    assert "0 new, 0 updated, 5 unchanged, 0 failed; 0 chunks" in again


def test_ingest_exits_1_and_lists_failed_files_while_the_others_are_ingested(documents_dir):
    broken = documents_dir / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 broken")

    error, output = run_failing("ingest", str(documents_dir))

    assert error.returncode == 1
    assert "1 file(s) failed" in str(error)
    assert "5 new, 0 updated, 0 unchanged, 1 failed" in output
    assert f"{broken.resolve()}: Could not read the PDF" in output
    assert Document.objects.filter(status=Document.Status.READY).count() == 5
    assert Document.objects.get(status=Document.Status.FAILED).source == str(broken.resolve())


def test_ingest_of_a_missing_path_is_a_command_error(tmp_path):
    missing = tmp_path / "nope.md"

    error, _ = run_failing("ingest", str(missing))

    assert str(error) == f"No such file or directory: {missing}"
    assert not Document.objects.exists()


def test_ingest_of_an_unsupported_type_fails_naming_the_supported_types(tmp_path):
    sheet = tmp_path / "budget.xls"
    sheet.write_bytes(b"PK\x03\x04")

    error, output = run_failing("ingest", str(sheet))

    assert error.returncode == 1
    assert "Unsupported file type '.xls' (budget.xls)" in output
    supported = (
        ".pdf, .md/.markdown, .html/.htm, .txt, .docx, .xlsx, .csv, .pptx, .odt, .ods, "
        ".png, .jpg/.jpeg, .tif/.tiff"
    )
    assert f"Supported types: {supported}." in output
    assert not Document.objects.exists()


def test_ingest_from_the_shell_exits_1_with_a_message_not_a_traceback(tmp_path):
    sheet = tmp_path / "budget.xls"
    sheet.write_bytes(b"PK\x03\x04")

    missing = manage("ingest", str(tmp_path / "nope.md"))
    unsupported = manage("ingest", str(sheet))

    assert missing.returncode == 1
    assert f"No such file or directory: {tmp_path / 'nope.md'}" in missing.stderr
    assert unsupported.returncode == 1
    assert "Unsupported file type '.xls'" in unsupported.stdout
    assert "1 file(s) failed" in unsupported.stderr
    for result in (missing, unsupported):
        assert "Traceback" not in result.stdout + result.stderr


def test_a_directory_without_supported_files_is_a_command_error(tmp_path):
    (tmp_path / "budget.xls").write_bytes(b"x")
    (tmp_path / "slides.key").write_bytes(b"x")

    error, _ = run_failing("ingest", str(tmp_path))

    assert "No supported documents found (2 file(s) of other types skipped)" in str(error)


def test_skipped_files_are_counted_in_the_summary(documents_dir):
    (documents_dir / "budget.xls").write_bytes(b"x")

    output = run("ingest", str(documents_dir))

    assert "Skipped 1 file(s) of unsupported types." in output


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read any file")
def test_an_unreadable_file_is_a_command_error(documents_dir):
    locked = documents_dir / "handbook.md"
    locked.chmod(0)
    try:
        error, _ = run_failing("ingest", str(documents_dir))
    finally:
        locked.chmod(0o644)

    assert f"Cannot read: {locked}" in str(error)
    assert not Document.objects.exists()


def test_title_is_only_allowed_with_a_single_file(documents_dir):
    error, _ = run_failing("ingest", str(documents_dir), "--title", "Everything")
    assert "--title can only be used with a single file" in str(error)

    run("ingest", str(documents_dir / "handbook.md"), "--title", "Staff Handbook 2026")
    assert Document.objects.get().title == "Staff Handbook 2026"


def test_disabled_documents_are_ingested_disabled(documents_dir):
    run("ingest", str(documents_dir / "handbook.md"), "--disabled")

    document = Document.objects.get()
    assert not document.enabled
    assert document.status == Document.Status.READY


def test_ingest_dry_run_writes_nothing(documents_dir):
    output = run("ingest", str(documents_dir), "--dry-run")

    assert "Would ingest 5 file(s)" in output
    assert "Dry run: nothing was written." in output
    assert not Document.objects.exists()
    assert not Chunk.objects.exists()


def test_reindex_stale_rebuilds_embeddings_of_another_model(documents_dir):
    run("ingest", str(documents_dir / "handbook.md"))
    count = Chunk.objects.count()
    Embedding.objects.update(model="all-MiniLM-L6-v2@previous")

    dry = run("reindex", "--stale", "--dry-run")
    assert f"Would re-embed {count} chunk(s)" in dry
    assert set(Embedding.objects.values_list("model", flat=True)) == {"all-MiniLM-L6-v2@previous"}

    output = run("reindex")  # --stale is the default

    assert f"Re-embedded {count} chunk(s) with {embedding.model_version()}" in output
    assert set(Embedding.objects.values_list("model", flat=True)) == {embedding.model_version()}
    assert Embedding.objects.count() == count
    assert "Every chunk has an embedding" in run("reindex", "--stale")


def test_reindex_documents_rechunks_them(documents_dir):
    run("ingest", str(documents_dir / "handbook.md"), str(documents_dir / "it-security.html"))
    handbook = Document.objects.get(source__endswith="handbook.md")
    count = handbook.chunks.count()
    handbook.chunks.all().delete()

    output = run("reindex", "--document", str(handbook.pk))

    assert "Re-indexed 1 document(s)" in output
    assert handbook.chunks.count() == count
    assert "Re-indexed 2 document(s)" in run("reindex", "--all")


def test_reindex_reports_documents_whose_file_is_gone(documents_dir):
    path = documents_dir / "handbook.md"
    run("ingest", str(path))
    path.unlink()

    error, output = run_failing("reindex", "--all")

    assert error.returncode == 1
    assert "no longer available" in output
    assert Document.objects.get().status == Document.Status.READY


def test_reindex_of_an_unknown_document_is_a_command_error(documents_dir):
    run("ingest", str(documents_dir / "handbook.md"))
    known = Document.objects.get().pk

    error, _ = run_failing("reindex", "--document", str(known), str(known + 1000))

    assert str(error) == f"No document with id {known + 1000}."


def test_reindex_dry_run_lists_documents_and_changes_nothing(documents_dir):
    run("ingest", str(documents_dir / "handbook.md"))
    chunk_ids = set(Chunk.objects.values_list("pk", flat=True))

    output = run("reindex", "--all", "--dry-run")

    assert "Would re-chunk and re-embed 1 document(s)" in output
    assert set(Chunk.objects.values_list("pk", flat=True)) == chunk_ids


def test_reindex_stale_rechunks_documents_cut_by_an_older_chunker(documents_dir):
    run("ingest", str(documents_dir / "handbook.md"), str(documents_dir / "it-security.html"))
    handbook = Document.objects.get(source__endswith="handbook.md")
    assert handbook.chunker_version == CHUNKER_VERSION
    # As if the handbook had been cut by the chunker before today's: other chunks.
    Document.objects.filter(pk=handbook.pk).update(chunker_version=CHUNKER_VERSION - 1)
    first = handbook.chunks.order_by("index").first()
    first.text = "text of an older chunker"
    first.text_hash = text_hash(first.text)
    first.save()

    dry = run("reindex", "--stale", "--dry-run")
    assert "Would re-chunk 1 document(s) cut by an older chunker" in dry
    assert handbook.chunks.filter(text="text of an older chunker").exists()

    output = run("reindex", "--stale")

    assert "Re-indexed 1 document(s)" in output
    handbook.refresh_from_db()
    assert handbook.chunker_version == CHUNKER_VERSION
    assert not handbook.chunks.filter(text="text of an older chunker").exists()
    assert "Would re-chunk" not in run("reindex", "--stale", "--dry-run")


def test_ingesting_an_unchanged_file_cut_by_an_older_chunker_rechunks_it(documents_dir):
    path = documents_dir / "handbook.md"
    run("ingest", str(path))
    assert "1 unchanged" in run("ingest", str(path))
    Document.objects.update(chunker_version=CHUNKER_VERSION - 1)

    output = run("ingest", str(path))

    assert "0 new, 1 updated, 0 unchanged, 0 failed" in output
    assert Document.objects.get().chunker_version == CHUNKER_VERSION


def test_ingest_into_a_collection_creates_the_documents_there_from_their_first_save(
    documents_dir, django_user_model
):
    hr = collection_create(name="HR only", groups=[Group.objects.create(name="HR")])
    saved_in: list[int] = []

    def record(sender, instance, **kwargs):
        saved_in.append(instance.collection_id)

    post_save.connect(record, sender=Document)
    try:
        output = run("ingest", str(documents_dir / "handbook.md"), "--collection", "hr ONLY")
    finally:
        post_save.disconnect(record, sender=Document)

    assert "1 new" in output
    document = Document.objects.get()
    assert document.collection == hr
    assert saved_in and set(saved_in) == {hr.pk}  # never saved in General, even briefly
    staff = django_user_model.objects.create_user("staff", password="x", is_staff=True)
    assert not documents_readable(user=staff).exists()


def test_ingest_without_a_collection_goes_to_general_and_keeps_existing_collections(
    documents_dir,
):
    hr = collection_create(name="HR only", groups=[Group.objects.create(name="HR")])
    run("ingest", str(documents_dir / "handbook.md"))
    assert Document.objects.get().collection == collection_default()

    (documents_dir / "handbook.md").write_text("# Handbook\n\nA changed version of it.\n")
    run("ingest", str(documents_dir / "handbook.md"), "--collection", "HR only")
    assert Document.objects.get().collection == collection_default()  # kept: moving is explicit
    assert hr.documents.count() == 0


def test_ingest_into_an_unknown_collection_is_a_command_error_and_writes_nothing(documents_dir):
    error, _ = run_failing("ingest", str(documents_dir), "--collection", "Payroll")

    assert "No collection is named “Payroll”" in str(error)
    assert not Document.objects.exists()
