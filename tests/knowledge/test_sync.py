"""`manage.py sync PATH`: a folder mirrored into the knowledge base (knowledge/services/sync.py):
new files ingested, changed files re-read, moved files followed, documents of files that left
deleted, and documents of any other origin never touched."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection

from knowledge.access import OPERATOR, documents_readable
from knowledge.collections import collection_create
from knowledge.models import Chunk, Document, SyncRun
from knowledge.retrieval import chunks_search
from knowledge.services import document_ingest, document_write
from knowledge.services.sync import folder_root
from tests.support.knowledge_base import LEAVE_TEXTS, document_create
from tests.support.live_server import database_url_of
from tests.support.readers import readers_create

pytestmark = pytest.mark.django_db

POLICIES = {
    "leave.md": "# Annual leave\n\nFull-time employees receive 25 days of paid annual leave.\n",
    "travel/expenses.md": "# Expenses\n\nThe daily meal allowance while travelling is 45 euros.\n",
    "security.txt": "Passwords must be at least 14 characters long and never reused.\n",
}


def write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def folder(tmp_path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    write(shared, POLICIES)
    return shared


def sync(*args: str) -> str:
    out = StringIO()
    call_command("sync", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def sync_failing(*args: str) -> tuple[CommandError, str]:
    out = StringIO()
    with pytest.raises(CommandError) as caught:
        call_command("sync", *args, stdout=out, stderr=StringIO())
    return caught.value, out.getvalue()


def texts_of(path: Path) -> list[str]:
    document = Document.objects.get(source=str(path.resolve()))
    return list(document.chunks.order_by("index").values_list("text", flat=True))


def found(query: str) -> set[str]:
    """Titles of the documents a search for `query` retrieves."""
    result = chunks_search(reader=OPERATOR, query=query, top_k=5)
    return {chunk.document_title for chunk in result.chunks}


def test_a_first_sync_ingests_every_supported_file_of_the_folder_recursively(folder):
    (folder / "notes.bin").write_bytes(b"\x00\x01")

    output = sync(str(folder))

    root = folder_root(folder)
    documents = Document.objects.filter(sync_root=root)
    assert sorted(Path(d.source).name for d in documents) == [
        "expenses.md",
        "leave.md",
        "security.txt",
    ]
    assert {d.status for d in documents} == {Document.Status.READY}
    assert "3 added" in output and "1 skipped" in output and "notes.bin" in output
    run = SyncRun.objects.get()
    assert (run.status, run.added, run.updated, run.removed, run.skipped) == (
        "finished",
        3,
        0,
        0,
        1,
    )
    assert "Annual leave" in found("how many days of annual leave")


def test_a_changed_file_is_re_read_and_only_its_new_text_is_embedded(folder, embedded_texts):
    sync(str(folder))
    (folder / "leave.md").write_text(
        "# Annual leave\n\nFull-time employees receive 30 days of paid annual leave.\n",
        encoding="utf-8",
    )
    embedded_texts.clear()

    output = sync(str(folder))

    assert "1 updated" in output and "2 unchanged" in output
    assert any("30 days" in text for text in texts_of(folder / "leave.md"))
    assert not any("25 days" in text for text in texts_of(folder / "leave.md"))
    assert embedded_texts and all("45 euros" not in text for text in embedded_texts)
    assert SyncRun.objects.latest("started_at").updated == 1


def test_a_second_sync_of_an_unchanged_folder_changes_nothing(folder, embedded_texts):
    sync(str(folder))
    before = list(Chunk.objects.order_by("pk").values_list("pk", flat=True))
    embedded_texts.clear()

    output = sync(str(folder))

    assert "0 added, 0 updated, 0 moved, 0 removed, 3 unchanged" in output
    assert list(Chunk.objects.order_by("pk").values_list("pk", flat=True)) == before
    assert embedded_texts == []


def test_a_file_deleted_from_the_folder_is_no_longer_answered_from(folder):
    sync(str(folder))
    assert "Expenses" in found("daily meal allowance while travelling")
    (folder / "travel" / "expenses.md").unlink()

    output = sync(str(folder))

    assert "1 removed" in output
    assert not Document.objects.filter(title="Expenses").exists()
    assert "Expenses" not in found("daily meal allowance while travelling")
    assert Document.objects.filter(sync_root=folder_root(folder)).count() == 2


def test_documents_of_any_other_origin_are_never_touched(folder, tmp_path):
    uploaded = document_create(title="Uploaded in the admin", texts=LEAVE_TEXTS[:1])
    elsewhere = tmp_path / "elsewhere.md"
    elsewhere.write_text("# Elsewhere\n\nThe canteen opens at noon.\n", encoding="utf-8")
    by_hand_elsewhere = document_ingest(path=elsewhere).document
    # A file of the folder ingested by hand before the first sync stays the hand's.
    by_hand_inside = document_ingest(path=folder / "security.txt").document
    untouched = {
        d.pk: (d.source, d.content_hash, d.updated_at)
        for d in (uploaded, by_hand_elsewhere, by_hand_inside)
    }

    output = sync(str(folder))
    (folder / "security.txt").unlink()
    elsewhere.unlink()
    second = sync(str(folder))

    assert "security.txt" in output and "did not come from this source" in output
    assert "0 removed" in second
    for pk, state in untouched.items():
        document = Document.objects.get(pk=pk)
        assert (document.source, document.content_hash, document.updated_at) == state
        assert document.sync_root == ""
    assert Document.objects.filter(sync_root=folder_root(folder)).count() == 2


def test_a_hand_ingest_of_a_synced_file_leaves_it_owned_by_the_sync(folder):
    sync(str(folder))
    (folder / "leave.md").write_text("# Annual leave\n\nIt is 28 days now.\n", encoding="utf-8")

    outcome = document_ingest(path=folder / "leave.md")

    assert outcome.action == "updated"
    assert outcome.document.sync_root == folder_root(folder)
    (folder / "leave.md").unlink()
    assert "1 removed" in sync(str(folder))


def test_a_file_moved_inside_the_folder_keeps_its_document_and_is_not_re_embedded(
    folder, embedded_texts
):
    sync(str(folder))
    document = Document.objects.get(source=str((folder / "leave.md").resolve()))
    chunks = list(document.chunks.values_list("pk", flat=True))
    (folder / "archive").mkdir()
    (folder / "leave.md").rename(folder / "archive" / "leave-2026.md")
    embedded_texts.clear()

    output = sync(str(folder))

    assert "1 moved" in output and "0 added" in output and "0 removed" in output
    document.refresh_from_db()
    assert document.source == str((folder / "archive" / "leave-2026.md").resolve())
    assert document.title == "Annual leave"  # its own heading, not a file name
    assert list(document.chunks.values_list("pk", flat=True)) == chunks
    assert embedded_texts == []


def test_a_copied_file_reuses_the_stored_embeddings(folder, embedded_texts):
    sync(str(folder))
    (folder / "copy-of-leave.md").write_bytes((folder / "leave.md").read_bytes())
    embedded_texts.clear()

    output = sync(str(folder))

    assert "1 added" in output
    assert embedded_texts == []


def test_dry_run_lists_what_it_would_do_and_changes_nothing(folder, embedded_texts):
    sync(str(folder))
    (folder / "leave.md").write_text("# Annual leave\n\nNow 27 days.\n", encoding="utf-8")
    (folder / "security.txt").unlink()
    write(folder, {"new/remote.md": "# Remote work\n\nTwo days a week at home.\n"})
    (folder / "travel" / "expenses.md").rename(folder / "travel" / "expenses-2026.md")
    before = list(Document.objects.order_by("pk").values_list("pk", "source", "content_hash"))
    runs = SyncRun.objects.count()
    embedded_texts.clear()

    output = sync(str(folder), "--dry-run")

    assert f"add     {(folder / 'new' / 'remote.md').resolve()}" in output
    assert f"update  {(folder / 'leave.md').resolve()}" in output
    assert f"remove  {(folder / 'security.txt').resolve()}" in output
    assert f"move    {(folder / 'travel' / 'expenses.md').resolve()} -> " in output
    assert "Would add 1, update 1, move 1, remove 1; 0 unchanged" in output
    assert "nothing was written" in output
    assert list(Document.objects.order_by("pk").values_list("pk", "source", "content_hash")) == (
        before
    )
    assert SyncRun.objects.count() == runs
    assert embedded_texts == []


def test_new_documents_land_in_the_collection_the_sync_names(folder):
    readers = readers_create()
    hr_only = collection_create(name="HR only", groups=[readers["hr"]])

    sync(str(folder), "--collection", "hr ONLY")

    synced = Document.objects.filter(sync_root=folder_root(folder))
    assert {d.collection_id for d in synced} == {hr_only.pk}
    assert set(documents_readable(user=readers["asker"])) >= set(synced)
    assert not documents_readable(user=readers["staff"]).filter(pk__in=synced).exists()


def test_an_unknown_collection_is_a_command_error_and_writes_nothing(folder):
    with pytest.raises(CommandError, match="No collection is named"):
        sync(str(folder), "--collection", "Nope")
    assert not Document.objects.exists()
    assert not SyncRun.objects.exists()


def test_a_missing_folder_is_a_command_error(tmp_path):
    with pytest.raises(CommandError, match="No such folder"):
        sync(str(tmp_path / "missing"))


def test_a_folder_emptied_like_an_unmounted_share_removes_nothing_unless_allowed(folder):
    sync(str(folder))
    for path in sorted(folder.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()

    with pytest.raises(CommandError, match="is it mounted"):
        sync(str(folder))

    assert Document.objects.filter(sync_root=folder_root(folder)).count() == 3
    assert SyncRun.objects.latest("started_at").status == SyncRun.Status.FAILED
    assert "3 removed" in sync(str(folder), "--allow-empty")
    assert not Document.objects.exists()


def test_files_under_a_folder_that_cannot_be_listed_are_kept(folder, monkeypatch):
    sync(str(folder))
    real_walk = os.walk

    def walk_without_travel(top, *args, onerror=None, **kwargs):
        # As os.walk does for a sub-folder it may not list (root reads any folder here).
        for root, dirs, names in real_walk(top, *args, onerror=onerror, **kwargs):
            if "travel" in dirs:
                dirs.remove("travel")
                onerror(PermissionError(13, "Permission denied", str(Path(root) / "travel")))
            yield root, dirs, names

    monkeypatch.setattr(os, "walk", walk_without_travel)
    planned = sync(str(folder), "--dry-run")
    error, output = sync_failing(str(folder))

    assert not [line for line in planned.splitlines() if line.startswith("remove")]
    assert "Would add 0, update 0, move 0, remove 0" in planned

    assert "0 removed" in output and "Could not list the folder" in output
    assert Document.objects.filter(title="Expenses").exists()
    monkeypatch.undo()
    assert "0 removed, 3 unchanged" in sync(str(folder))


def test_a_file_that_fails_is_reported_and_the_others_are_synced(folder):
    (folder / "empty.md").write_text("   \n", encoding="utf-8")

    with pytest.raises(CommandError, match="1 file"):
        sync(str(folder))

    run = SyncRun.objects.get()
    assert (run.added, run.failed) == (3, 1)
    assert run.errors[0][0].endswith("empty.md")
    failed = Document.objects.get(source=str((folder / "empty.md").resolve()))
    assert failed.sync_root == folder_root(folder)  # removed by the sync once the file goes
    (folder / "empty.md").unlink()
    assert "1 removed" in sync(str(folder))


def test_a_sync_failing_half_way_is_finished_by_the_next_run(folder, monkeypatch):
    sync(str(folder))
    for name in POLICIES:
        path = folder / name
        path.write_text(path.read_text(encoding="utf-8") + "\nRevised in 2026.\n", "utf-8")
    real_write = document_write._write
    written: list[str] = []

    def write_then_die(job):
        if written:
            raise SystemExit("killed")  # not an Exception: nothing in ingestion catches it
        written.append(job.source)
        return real_write(job)

    monkeypatch.setattr(document_write, "_write", write_then_die)
    with pytest.raises(SystemExit):
        sync(str(folder))
    monkeypatch.undo()

    revised = [
        any("Revised in 2026" in text for text in texts_of(folder / name)) for name in POLICIES
    ]
    assert sorted(revised) == [False, False, True]  # each document old or new, never half
    assert SyncRun.objects.latest("started_at").status == SyncRun.Status.RUNNING
    output = sync(str(folder))
    assert "2 updated" in output and "1 unchanged" in output
    assert all(
        any("Revised in 2026" in text for text in texts_of(folder / name)) for name in POLICIES
    )
    statuses = list(SyncRun.objects.order_by("started_at").values_list("status", flat=True))
    assert statuses == ["finished", "interrupted", "finished"]


KILLABLE_SYNC = textwrap.dedent(
    """
    import sys, time, django
    django.setup()
    from django.core.management import call_command
    from knowledge.services import document_write
    real_write = document_write._write

    def slow_write(job):  # a slow disk: each document's write takes a while
        document = real_write(job)
        print("written", job.source, flush=True)
        time.sleep(0.4)
        return document

    document_write._write = slow_write
    call_command("sync", sys.argv[1])
    """
)


@pytest.mark.django_db(transaction=True)
def test_a_sync_process_killed_mid_run_leaves_each_document_whole_and_the_next_run_finishes(
    tmp_path,
):
    folder = tmp_path / "shared"
    names = [f"policy-{n:02d}.md" for n in range(12)]
    write(
        folder,
        {name: f"# Policy {n}\n\nRule {n} applies to everyone.\n" for n, name in enumerate(names)},
    )
    sync(str(folder))
    for n, name in enumerate(names):
        (folder / name).write_text(f"# Policy {n}\n\nRule {n} was revised in 2026.\n", "utf-8")
    env = {
        **os.environ,
        "DATABASE_URL": database_url_of(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "PYTHONUNBUFFERED": "1",
    }
    process = subprocess.Popen(
        [sys.executable, "-c", KILLABLE_SYNC, str(folder)],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,  # the progress bar
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        lines: list[str] = []
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            lines.append(line)
            if line.startswith("written") or not line:
                break
        assert lines[-1].startswith("written"), "".join(lines)
        process.send_signal(signal.SIGKILL)
    finally:
        process.kill()
        process.wait()

    revised = []
    for name in names:
        document = Document.objects.get(source=str((folder / name).resolve()))
        texts = texts_of(folder / name)
        assert len(texts) == 1 and document.status == Document.Status.READY
        revised.append("revised in 2026" in texts[0])
        assert document.chunks.filter(embeddings__isnull=False).count() == 1
    assert 1 <= sum(revised) < len(names)  # killed half-way: some new, the others old
    assert SyncRun.objects.latest("started_at").status == SyncRun.Status.RUNNING

    output = sync(str(folder))

    assert f"{len(names) - sum(revised)} updated" in output
    assert all("revised in 2026" in texts_of(folder / name)[0] for name in names)
    assert list(SyncRun.objects.order_by("started_at").values_list("status", flat=True)) == [
        "finished",
        "interrupted",
        "finished",
    ]


def test_a_synced_document_disabled_in_the_admin_stays_disabled_when_its_file_changes(folder):
    sync(str(folder))
    leave = Document.objects.get(source=str((folder / "leave.md").resolve()))
    Document.objects.filter(pk=leave.pk).update(enabled=False)
    (folder / "leave.md").write_text("# Annual leave\n\nIt is 26 days now.\n", "utf-8")

    assert "1 updated" in sync(str(folder))

    leave.refresh_from_db()
    assert not leave.enabled
    assert "26 days" in leave.chunks.get().text


def test_only_the_last_hundred_runs_of_a_folder_are_kept(folder, tmp_path):
    root = folder_root(folder)
    other = SyncRun.objects.create(root=str(tmp_path / "other"), trigger="command")
    SyncRun.objects.bulk_create(
        SyncRun(root=root, trigger="worker", status="finished") for _ in range(120)
    )

    sync(str(folder))

    assert SyncRun.objects.filter(root=root).count() == 100
    assert SyncRun.objects.filter(root=root).latest("started_at").added == 3
    assert SyncRun.objects.filter(pk=other.pk).exists()
