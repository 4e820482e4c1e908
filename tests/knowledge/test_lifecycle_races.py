"""A document changed by someone else while the worker processes it: deleted by an admin or
by `purge_expired` (it stays deleted, docs/decisions/0090-a-document-written-back-by-its-id.md),
or retitled by an admin (the title stays). The change is made from inside the processing,
between the moment it read the document and its write."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from knowledge.models import Chunk, Document
from knowledge.parsers import DocumentParseError
from knowledge.services import (
    document_ingest,
    document_process,
    documents_ingest,
    documents_purge_expired,
    documents_reindex,
    ingest,
    ingest_window,
)
from knowledge.tasks import document_process_task
from tests.support.spreadsheets import inventory_xlsx

pytestmark = pytest.mark.django_db

POLICY = """Every employee may lease a bicycle worth up to 1,500 pounds through the cycle scheme.
"""
POLICY_V2 = """Every employee may lease a bicycle worth up to 2,000 pounds through the cycle scheme.
"""


@pytest.fixture
def policy(tmp_path) -> Document:
    path = tmp_path / "cycle-scheme.txt"
    path.write_text(POLICY, encoding="utf-8")
    document = document_ingest(path=path).document
    assert document.status == Document.Status.READY
    Path(document.source).write_text(POLICY_V2, encoding="utf-8")  # a new version to process
    return document


def meanwhile(monkeypatch, change) -> None:
    """Run `change()` while the document is being processed: after it was read and parsed,
    before its chunks are written."""
    real = ingest_window._jobs_embed

    def embed(jobs):
        change()
        return real(jobs)

    monkeypatch.setattr(ingest_window, "_jobs_embed", embed)


def delete(document: Document):
    return lambda: Document.objects.filter(pk=document.pk).delete()


def purge(document: Document):
    def expire_and_purge() -> None:
        Document.objects.filter(pk=document.pk).update(
            expires_at=timezone.now() - timedelta(minutes=1)
        )
        assert [d.pk for d in documents_purge_expired()] == [document.pk]

    return expire_and_purge


def assert_gone(document: Document) -> None:
    assert not Document.objects.filter(source=document.source).exists()
    assert not Chunk.objects.filter(text__contains="bicycle").exists()


@pytest.mark.parametrize("remove", [delete, purge], ids=["admin-delete", "purge-expired"])
def test_a_document_deleted_while_the_worker_processes_it_stays_deleted(
    policy, monkeypatch, caplog, remove
):
    meanwhile(monkeypatch, remove(policy))

    with caplog.at_level(logging.INFO, logger="knowledge"):
        result = document_process_task.call(policy.pk)

    assert result == "deleted"
    assert_gone(policy)
    logged = [r.getMessage() for r in caplog.records if r.name == "knowledge.tasks"]
    assert any(
        f"document {policy.pk}" in m and "deleted while it was being processed" in m for m in logged
    ), logged


def test_a_deleted_document_whose_processing_fails_leaves_no_failed_row(policy, monkeypatch):
    def delete_then_fail(texts):
        Document.objects.filter(pk=policy.pk).delete()
        raise RuntimeError("the model is gone too")

    monkeypatch.setattr(ingest_window, "texts_embed", delete_then_fail)

    outcome = document_process(document=policy)

    assert (outcome.action, outcome.deleted, outcome.document) == ("failed", True, None)
    assert_gone(policy)


def test_a_deleted_document_whose_file_no_longer_parses_leaves_no_failed_row(policy, monkeypatch):
    def delete_then_refuse(*, data, name, **options):
        Document.objects.filter(pk=policy.pk).delete()
        raise DocumentParseError("No text could be extracted.")

    monkeypatch.setattr(ingest, "document_parse_isolated", delete_then_refuse)

    outcome = document_process(document=policy)

    assert outcome.deleted
    assert_gone(policy)


@pytest.mark.parametrize("how", ["ingest", "reindex"])
def test_ingest_and_reindex_of_a_document_deleted_meanwhile_do_not_recreate_it(
    policy, monkeypatch, how
):
    meanwhile(monkeypatch, delete(policy))

    if how == "ingest":
        [outcome] = documents_ingest(
            paths=[Path(policy.source)], title=None, enabled=True, dry_run=False
        )
    else:
        [outcome] = documents_reindex(documents=[policy])

    assert (outcome.action, outcome.deleted) == ("failed", True)
    assert "deleted while it was being processed" in outcome.error
    assert_gone(policy)


def test_ingesting_a_new_file_still_creates_its_document(tmp_path):
    path = tmp_path / "new-policy.txt"
    path.write_text(POLICY, encoding="utf-8")

    outcome = document_ingest(path=path)

    assert outcome.action == "new"
    assert Document.objects.get(source=str(path.resolve())).status == Document.Status.READY


def test_a_title_an_admin_sets_while_the_document_is_processed_stays(tmp_path, monkeypatch):
    path = tmp_path / "cycle-scheme.txt"  # no title of its own: the name would give one
    path.write_text(POLICY, encoding="utf-8")
    document = Document.objects.create(title="", source=str(path), media_type="text/plain")

    def retitle() -> None:
        Document.objects.filter(pk=document.pk).update(title="Cycle to work")

    meanwhile(monkeypatch, retitle)

    outcome = document_process(document=document)

    assert outcome.action == "new"
    document.refresh_from_db()
    assert (document.title, document.status) == ("Cycle to work", Document.Status.READY)


def test_a_document_without_a_title_still_gets_one_from_its_file(tmp_path):
    path = tmp_path / "cycle-scheme.txt"
    path.write_text(POLICY, encoding="utf-8")
    document = Document.objects.create(title="", source=str(path), media_type="text/plain")

    document_process(document=document)

    document.refresh_from_db()
    assert document.title == "Cycle scheme"


def test_a_link_an_admin_sets_while_a_spreadsheet_is_processed_stays(tmp_path, monkeypatch):
    document = document_ingest(path=inventory_xlsx(tmp_path / "inventory.xlsx")).document
    assert document.metadata.get("sheets")

    def link() -> None:
        Document.objects.filter(pk=document.pk).update(
            metadata={**document.metadata, "url": "https://intranet.example/inventory"}
        )

    meanwhile(monkeypatch, link)

    assert document_process(document=document).action == "updated"

    document.refresh_from_db()
    assert document.metadata["url"] == "https://intranet.example/inventory"
    assert document.metadata.get("sheets")  # the parser's part, merged over it
