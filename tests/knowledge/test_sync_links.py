"""Synced sources are read only inside their root (issue 36, finding 3): symbolic links in a
synced or ingested folder are never followed, an original file is served only from inside its
own root and never through a link (checked as it is opened), and `SYNC_ALLOWED_ROOTS` limits
where a watched folder may point. docs/decisions/0135-synced-files-read-inside-their-root.md."""

from __future__ import annotations

import os
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from knowledge.access import OPERATOR
from knowledge.models import Chunk, Document, Source, SyncRun
from knowledge.retrieval import chunks_search
from knowledge.selectors import document_original_path
from knowledge.services import document_process
from knowledge.services.sync import folder_root
from knowledge.sources.services import source_sync

pytestmark = pytest.mark.django_db

SECRET = "DATABASE_PASSWORD=hunter2-zebra-quasar"
OUTSIDE_TEXT = "The quasar zebra key opens the vault of the server room.\n"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder outside the synced one, holding secrets (a file and a folder of files)."""
    folder = tmp_path / "outside"
    (folder / "private").mkdir(parents=True)
    (folder / "secret.txt").write_text(f"{SECRET}\n{OUTSIDE_TEXT}", "utf-8")
    (folder / "private" / "keys.md").write_text(f"# Keys\n\n{SECRET}\n{OUTSIDE_TEXT}", "utf-8")
    return folder


@pytest.fixture
def shared(tmp_path) -> Path:
    folder = tmp_path / "shared"
    (folder / "hr").mkdir(parents=True)
    (folder / "leave.md").write_text(
        "# Annual leave\n\nFull-time employees receive 25 days of paid annual leave.\n", "utf-8"
    )
    return folder


def sync(path: Path) -> str:
    out = StringIO()
    call_command("sync", str(path), stdout=out, stderr=StringIO())
    return out.getvalue()


def searchable_texts() -> str:
    found = chunks_search(reader=OPERATOR, query="quasar zebra vault server room", top_k=10)
    return "\n".join(chunk.text for chunk in found.chunks)


def assert_nothing_of(outside: Path) -> None:
    stored = "\n".join(Chunk.objects.values_list("text", flat=True))
    assert SECRET not in stored and "quasar" not in stored
    assert "environ" not in "\n".join(Document.objects.values_list("source", flat=True))
    assert not any(source.startswith(str(outside)) for source in sources())
    assert SECRET not in searchable_texts() and "quasar" not in searchable_texts()


def sources() -> list[str]:
    return list(Document.objects.values_list("source", flat=True))


def test_links_to_files_and_folders_outside_the_root_are_neither_ingested_nor_searchable(
    shared, outside, staff_user, client
):
    (shared / "x.txt").symlink_to(outside / "secret.txt")
    (shared / "hr" / "private").symlink_to(outside / "private", target_is_directory=True)
    (shared / "environ.txt").symlink_to("/proc/self/environ")

    output = sync(shared)

    assert sources() == [str(shared / "leave.md")]
    assert_nothing_of(outside)
    assert "Skipped (symbolic links are not followed):" in output
    for link in ("x.txt", "hr/private", "environ.txt"):
        assert f"  {shared / link}\n" in output
    run = SyncRun.objects.get()
    assert run.skipped == 3 and run.failed == 0
    client.force_login(staff_user)
    listed = client.get("/api/documents").content.decode()
    assert "secret" not in listed.lower() and "environ" not in listed and "keys" not in listed


def test_a_link_inside_the_root_to_a_file_inside_the_root_is_not_followed_either(shared):
    (shared / "leave-copy.md").symlink_to(shared / "leave.md")
    (shared / "hr" / "all").symlink_to(shared, target_is_directory=True)

    output = sync(shared)

    assert sources() == [str(shared / "leave.md")]  # the file itself, once
    assert "leave-copy.md" in output and "hr/all" in output


def test_a_dry_run_lists_the_links_it_skips(shared, outside):
    (shared / "x.txt").symlink_to(outside / "secret.txt")
    out = StringIO()
    call_command("sync", str(shared), "--dry-run", stdout=out, stderr=StringIO())
    assert f"skip    {shared / 'x.txt'} (a symbolic link: links are not followed)" in out.getvalue()
    assert "1 skipped" in out.getvalue()


def test_ingest_of_a_folder_does_not_follow_its_links(shared, outside):
    (shared / "x.txt").symlink_to(outside / "secret.txt")
    (shared / "hr" / "private").symlink_to(outside / "private", target_is_directory=True)

    out = StringIO()
    call_command("ingest", str(shared), stdout=out, stderr=StringIO())

    assert sources() == [str(shared / "leave.md")]
    assert_nothing_of(outside)
    assert "Skipped 2 symbolic link(s): links are not followed." in out.getvalue()
    assert f"  skipped (a symbolic link): {shared / 'x.txt'}" in out.getvalue()


def test_ingest_of_a_link_named_explicitly_is_refused_readably(shared, outside):
    (shared / "x.txt").symlink_to(outside / "secret.txt")
    out = StringIO()
    with pytest.raises(CommandError):
        call_command("ingest", str(shared / "x.txt"), stdout=out, stderr=StringIO())
    assert "A symbolic link; links are not followed" in out.getvalue()
    assert_nothing_of(outside)


def test_a_synced_file_replaced_by_a_link_is_neither_served_nor_re_read_and_leaves(
    shared, outside, staff_user, client
):
    sync(shared)
    document = Document.objects.get(source=str(shared / "leave.md"))
    client.force_login(staff_user)
    file_url = reverse("knowledge:document_file", args=[document.pk])
    served = client.get(file_url)
    assert served.status_code == 200 and b"25 days" in b"".join(served.streaming_content)

    (shared / "leave.md").unlink()
    (shared / "leave.md").symlink_to(outside / "secret.txt")

    refused = client.get(file_url)
    assert refused.status_code == 404 and SECRET.encode() not in refused.content
    page = client.get(reverse("knowledge:document", args=[document.pk])).content.decode()
    assert file_url not in page  # no download offered
    outcome = document_process(document=document)
    assert outcome.action == "failed" and "symbolic link" in outcome.error
    assert_nothing_of(outside)

    sync(shared)  # the file left the folder: its document goes, the link is not read
    assert not Document.objects.filter(pk=document.pk).exists()
    assert_nothing_of(outside)


def test_a_folder_of_a_synced_file_replaced_by_a_link_is_not_served(
    shared, outside, staff_user, client
):
    (shared / "hr" / "pay.md").write_text("# Pay\n\nGrade 7 earns 41,000 pounds.\n", "utf-8")
    sync(shared)
    document = Document.objects.get(source=str(shared / "hr" / "pay.md"))
    (outside / "private" / "pay.md").write_text(SECRET, "utf-8")
    (shared / "hr").rename(shared / "hr-old")
    (shared / "hr").symlink_to(outside / "private", target_is_directory=True)
    client.force_login(staff_user)

    response = client.get(reverse("knowledge:document_file", args=[document.pk]))

    assert response.status_code == 404 and SECRET.encode() not in response.content


def test_a_hand_ingested_file_is_served_until_a_link_takes_its_place(
    tmp_path, outside, staff_user, client
):
    path = tmp_path / "policy.md"
    path.write_text("# Policy\n\nDesks are cleared every evening.\n", "utf-8")
    call_command("ingest", str(path), stdout=StringIO(), stderr=StringIO())
    document = Document.objects.get(source=str(path))
    client.force_login(staff_user)
    url = reverse("knowledge:document_file", args=[document.pk])
    assert client.get(url).status_code == 200

    path.unlink()
    path.symlink_to(outside / "secret.txt")

    assert client.get(url).status_code == 404


def test_an_upload_is_served_only_from_inside_the_media_root(settings, tmp_path, outside):
    settings.MEDIA_ROOT = tmp_path / "media"
    from django.core.files.base import ContentFile

    document = Document.objects.create(
        title="Expenses", source="upload:expenses.txt", media_type="text/plain", status="ready"
    )
    document.file.save("expenses.txt", ContentFile(b"Meals: 45 euros a day."))
    stored = Path(document.file.path)
    assert document_original_path(document) == stored
    stored.unlink()
    stored.symlink_to(outside / "secret.txt")
    assert document_original_path(document) is None


def test_opening_inside_a_root_refuses_links_anywhere_below_it_and_non_regular_files(
    tmp_path, outside
):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (root / "a" / "ok.txt").write_text("fine", "utf-8")
    (root / "b").symlink_to(outside, target_is_directory=True)
    os.mkfifo(root / "a" / "pipe.txt")
    from knowledge.services.paths import PathRefused, file_open_within

    with file_open_within(root / "a" / "ok.txt", root=root) as handle:
        assert handle.read() == b"fine"
    for path in (root / "b" / "secret.txt", root / "a" / ".." / "b" / "secret.txt"):
        with pytest.raises(PathRefused, match="symbolic link"):
            file_open_within(path, root=root)
    with pytest.raises(PathRefused, match="Outside the folder"):
        file_open_within(outside / "secret.txt", root=root)
    with pytest.raises(PathRefused, match="Outside the folder"):
        file_open_within(root / ".." / "outside" / "secret.txt", root=root)
    with pytest.raises(PathRefused, match="Not a regular file"):  # and does not block
        file_open_within(root / "a" / "pipe.txt", root=root)


def test_sync_allowed_roots_refuse_a_watched_folder_elsewhere(
    shared, tmp_path, settings, admin_client
):
    allowed = tmp_path / "allowed"
    (allowed / "policies").mkdir(parents=True)
    settings.SYNC_ALLOWED_ROOTS = [str(allowed), "/srv/nowhere"]

    refused = admin_client.post(
        reverse("admin:knowledge_source_add"),
        {"location": str(shared), "interval_minutes": 15, "enabled": "on"},
    )
    page = refused.content.decode()
    assert f"{shared} is outside the folders Sourced may sync" in page
    assert "SYNC_ALLOWED_ROOTS" in page and not Source.objects.exists()
    accepted = admin_client.post(
        reverse("admin:knowledge_source_add"),
        {"location": str(allowed / "policies"), "interval_minutes": 15, "enabled": "on"},
    )
    assert accepted.status_code == 302
    assert Source.objects.get().location == folder_root(allowed / "policies")

    with pytest.raises(CommandError, match="outside the folders Sourced may sync"):
        call_command("sync", str(shared), stdout=StringIO(), stderr=StringIO())
    assert not Document.objects.exists()


def test_a_watched_folder_outside_the_allowed_roots_fails_its_sync_readably(
    shared, tmp_path, settings
):
    folder = Source.objects.create(location=folder_root(shared))
    settings.SYNC_ALLOWED_ROOTS = [str(tmp_path / "allowed")]

    run = source_sync(source_id=folder.pk)

    assert run.status == SyncRun.Status.FAILED
    assert "is outside the folders Sourced may sync" in run.message
    assert not Document.objects.exists()
