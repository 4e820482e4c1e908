"""WebDAV share sync (`manage.py sync webdav://…`, knowledge/sources/webdav.py) against WsgiDAV,
a real WebDAV server, on loopback with basic auth (tests/support/sites.py)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from knowledge.models import Chunk, Document, SyncRun
from tests.support.sites import share_serving

pytestmark = pytest.mark.django_db

FAST = {"SOURCE_REQUESTS_PER_SECOND": 1000, "SOURCE_TIMEOUT_SECONDS": 5}


@pytest.fixture
def share(tmp_path, monkeypatch):
    folder = tmp_path / "share"
    (folder / "hr").mkdir(parents=True)
    (folder / "leave.md").write_text(
        "# Annual leave\n\nFull-time employees receive 25 days of paid annual leave.\n", "utf-8"
    )
    (folder / "hr" / "pay.md").write_text(
        "# Pay bands\n\nA Grade 7 analyst earns between 41,000 and 48,000 pounds.\n", "utf-8"
    )
    (folder / "hr" / "notes.xyz").write_text("not a document type", "utf-8")
    (folder / ".hidden.md").write_text("# Hidden\n\nNever read.\n", "utf-8")
    monkeypatch.setenv("SHARE_CREDENTIALS", "alice:wonder land")
    with share_serving(folder, user="alice", password="wonder land") as served:
        yield served


def sync(*args: str) -> str:
    out = StringIO()
    with override_settings(**FAST):
        call_command("sync", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def sync_failing(*args: str) -> tuple[CommandError, str]:
    out = StringIO()
    with pytest.raises(CommandError) as caught, override_settings(**FAST):
        call_command("sync", *args, stdout=out, stderr=StringIO())
    return caught.value, out.getvalue()


def synced(share) -> dict[str, Document]:
    root = share.location()
    return {
        document.source.removeprefix(root): document
        for document in Document.objects.filter(sync_root=root)
    }


def test_a_share_is_mirrored_with_basic_auth_from_the_environment(share):
    output = sync(share.location(), "--credentials-env", "SHARE_CREDENTIALS")

    documents = synced(share)
    assert sorted(documents) == ["hr/pay.md", "leave.md"], output
    assert "2 added" in output and "1 skipped" in output
    leave = documents["leave.md"]
    assert leave.title == "Annual leave" and leave.status == Document.Status.READY
    assert leave.url == f"http://127.0.0.1:{share.port}/docs/leave.md"
    assert share.count("PROPFIND") == 2  # the share and its sub-folder


def test_an_unchanged_share_is_listed_and_nothing_downloaded(share):
    sync(share.location(), "--credentials-env", "SHARE_CREDENTIALS")
    chunk_ids = set(Chunk.objects.values_list("pk", flat=True))
    share.requests.clear()

    output = sync(share.location(), "--credentials-env", "SHARE_CREDENTIALS")

    assert "0 added, 0 updated, 0 moved, 0 removed, 2 unchanged" in output
    assert share.count("GET") == 0 and share.count("PROPFIND") == 2
    assert set(Chunk.objects.values_list("pk", flat=True)) == chunk_ids


def test_changes_moves_and_removals_follow_the_folder_semantics(share):
    sync(share.location(), "--credentials-env", "SHARE_CREDENTIALS")
    before = synced(share)
    # A new size, so that the server's ETag changes (WsgiDAV's is made of the file's size and
    # its modification time in whole seconds).
    (share.folder / "leave.md").write_text(
        "# Annual leave\n\nFull-time employees receive thirty days of paid annual leave.\n",
        "utf-8",
    )
    (share.folder / "hr" / "pay.md").rename(share.folder / "pay-bands.md")
    (share.folder / "policy.md").write_text("# Policy\n\nA new policy on parking.\n", "utf-8")

    output = sync(share.location(), "--credentials-env", "SHARE_CREDENTIALS")

    after = synced(share)
    assert "1 added, 1 updated, 1 moved, 0 removed" in output, output
    assert after["pay-bands.md"].pk == before["hr/pay.md"].pk  # same document, not re-read
    assert after["leave.md"].pk == before["leave.md"].pk
    assert "thirty days" in " ".join(after["leave.md"].chunks.values_list("text", flat=True))

    (share.folder / "policy.md").unlink()
    output = sync(share.location(), "--credentials-env", "SHARE_CREDENTIALS")

    assert "1 removed" in output and "policy.md" not in synced(share)


def test_refused_credentials_or_an_unset_variable_change_nothing(share, monkeypatch):
    sync(share.location(), "--credentials-env", "SHARE_CREDENTIALS")
    monkeypatch.setenv("SHARE_CREDENTIALS", "alice:wrong")

    error, _ = sync_failing(share.location(), "--credentials-env", "SHARE_CREDENTIALS")

    assert "refused the credentials (401)" in str(error)
    assert len(synced(share)) == 2
    assert SyncRun.objects.filter(status=SyncRun.Status.FAILED).count() == 1
    monkeypatch.delenv("SHARE_CREDENTIALS")
    error, _ = sync_failing(share.location(), "--credentials-env", "SHARE_CREDENTIALS")
    assert "SHARE_CREDENTIALS" in str(error) and "not set" in str(error)
    assert len(synced(share)) == 2


def test_an_emptied_share_is_refused_unless_allowed(share):
    sync(share.location(), "--credentials-env", "SHARE_CREDENTIALS")
    for path in sorted(share.folder.rglob("*"), reverse=True):
        if path.is_file():
            path.unlink()

    error, _ = sync_failing(share.location(), "--credentials-env", "SHARE_CREDENTIALS")

    assert "gave nothing at all" in str(error) and len(synced(share)) == 2
    output = sync(share.location(), "--credentials-env", "SHARE_CREDENTIALS", "--allow-empty")
    assert "2 removed" in output and synced(share) == {}


def test_a_sub_folder_deeper_than_the_limit_is_not_listed_and_its_documents_kept(share):
    sync(share.location(), "--credentials-env", "SHARE_CREDENTIALS")

    with override_settings(SOURCE_MAX_DEPTH=0):
        output = sync(share.location(), "--credentials-env", "SHARE_CREDENTIALS")

    assert "SOURCE_MAX_DEPTH" in output
    assert sorted(synced(share)) == ["hr/pay.md", "leave.md"]  # kept, not removed
