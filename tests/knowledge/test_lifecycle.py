"""The document lifecycle: expiry (never retrieved, shown, purged) and the recency tie-break in
retrieval. Real PostgreSQL, real model (or vectors chosen by the test)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from io import StringIO
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from django.contrib.auth.models import Permission
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from knowledge.access import OPERATOR
from knowledge.models import Chunk, Document
from knowledge.ranking import RECENCY_MARGIN, days_read, recency_tie_break
from knowledge.retrieval import chunks_search
from knowledge.search_scope import knowledge_base_is_empty
from knowledge.services import document_ingest
from tests.support.knowledge_base import basis, document_create, unit
from tests.support.spreadsheets import inventory_xlsx

pytestmark = pytest.mark.django_db

QUESTION = "What is the safety stock for the brass valve QX-2207?"


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def make_expired(document: Document, *, ago: timedelta = timedelta(minutes=1)) -> None:
    Document.objects.filter(pk=document.pk).update(expires_at=timezone.now() - ago)


# --- Expiry ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["hybrid", "vector", "lexical"])
def test_expired_document_chunks_are_never_retrieved(tmp_path, mode):
    inventory = document_ingest(path=inventory_xlsx(tmp_path / "inventory.xlsx")).document
    later = document_create(
        title="Valve catalogue",
        texts=["The brass valve QX-2207 is a half-inch valve made of brass."],
    )
    Document.objects.filter(pk=later.pk).update(expires_at=timezone.now() + timedelta(days=3))

    before = {
        c.document_id
        for c in chunks_search(reader=OPERATOR, query=QUESTION, mode=mode, top_k=10).chunks
    }
    assert inventory.pk in before and later.pk in before  # expiring later: still searchable

    make_expired(inventory)
    after = {
        c.document_id
        for c in chunks_search(reader=OPERATOR, query=QUESTION, mode=mode, top_k=10).chunks
    }
    assert inventory.pk not in after and later.pk in after


def test_a_knowledge_base_of_expired_documents_counts_as_empty():
    document = document_create(title="Old memo", texts=["The canteen closes at two."])
    assert not knowledge_base_is_empty(reader=OPERATOR)
    make_expired(document)
    assert knowledge_base_is_empty(reader=OPERATOR)


def test_ingest_expires_in_sets_the_expiry_and_the_api_shows_it(tmp_path, staff_user):
    path = inventory_xlsx(tmp_path / "inventory.xlsx")
    started = timezone.now()

    run("ingest", str(path), "--expires-in", "30")

    document = Document.objects.get()
    assert document.expires_at is not None
    assert timedelta(days=29.9) < document.expires_at - started < timedelta(days=30.1)
    run("ingest", str(path), "--expires-in", "2")  # unchanged file: only the expiry moves
    document.refresh_from_db()
    assert document.expires_at - started < timedelta(days=2.1)

    client = Client()
    client.force_login(staff_user)
    listed = client.get("/api/documents").json()["documents"][0]
    assert listed["expires_at"] is not None and listed["expired"] is False
    make_expired(document)
    # Withdrawn: listed only for those who manage documents (knowledge/access.py), as expired.
    assert client.get("/api/documents").json()["documents"] == []
    staff_user.user_permissions.add(Permission.objects.get(codename="view_document"))
    listed = client.get("/api/documents").json()["documents"][0]
    assert listed["expired"] is True


@pytest.mark.parametrize("days", ["0", "-3", "abc"])
def test_ingest_refuses_a_bad_expiry(tmp_path, days):
    path = inventory_xlsx(tmp_path / "inventory.xlsx")
    with pytest.raises(CommandError):
        call_command("ingest", str(path), "--expires-in", days, stdout=StringIO())
    assert not Document.objects.exists()


def test_purge_expired_deletes_only_expired_documents_and_dry_run_deletes_nothing():
    keep = document_create(title="Handbook", texts=["Leave is 25 days a year."])
    later = document_create(title="Promotion", texts=["The spring offer ends in May."])
    gone = document_create(title="Old price list", texts=["Valves cost 12 euros in 2024."])
    Document.objects.filter(pk=later.pk).update(expires_at=timezone.now() + timedelta(days=1))
    make_expired(gone, ago=timedelta(days=2))

    output = run("purge_expired", "--dry-run")
    assert "Old price list" in output and "Would delete 1 expired document(s)" in output
    assert Document.objects.count() == 3

    output = run("purge_expired")
    assert "Deleted 1 expired document(s)." in output
    assert set(Document.objects.values_list("title", flat=True)) == {"Handbook", "Promotion"}
    assert not Chunk.objects.filter(document_id=gone.pk).exists()
    assert keep.chunks.exists()


def test_expired_documents_are_marked_in_the_admin_and_the_document_view(tmp_path, admin_client):
    document = document_create(title="Old price list", texts=["Valves cost 12 euros."])
    make_expired(document, ago=timedelta(days=2))

    listing = admin_client.get("/admin/knowledge/document/").content.decode()
    assert "document-expired" in listing and "Expired " in listing
    filtered = admin_client.get("/admin/knowledge/document/?expiry=expired").content.decode()
    assert "Old price list" in filtered
    assert (
        "Old price list"
        not in admin_client.get("/admin/knowledge/document/?expiry=never").content.decode()
    )
    page = admin_client.get(f"/documents/{document.pk}/").content.decode()
    assert "data-expired" in page and "never cited" in page


# --- Recency -----------------------------------------------------------------------------


def twin_documents() -> tuple[Document, Document]:
    """Two documents holding the same text with the same vector: an exact tie on both sides
    of retrieval. The first created (lower ids) wins ties without the recency rule."""
    text = "Forklift batteries are charged overnight in bay four."
    vector = unit(basis(7) + 0.2 * basis(8))
    older = document_create(title="Older", texts=[text], vectors=[vector])
    newer = document_create(title="Newer", texts=[text], vectors=[vector])
    return older, newer


def set_updated(document: Document, days_ago: float) -> None:
    Document.objects.filter(pk=document.pk).update(
        updated_at=timezone.now() - timedelta(days=days_ago)
    )


@pytest.mark.parametrize("mode", ["hybrid", "vector", "lexical"])
def test_a_tie_goes_to_the_more_recently_updated_document(mode):
    older, newer = twin_documents()
    question = "When are forklift batteries charged?"
    query_vector = unit(basis(7) + 0.2 * basis(8) + 0.1 * basis(9))

    # Updated the same day: the order of the scores, ties by chunk id (the older first).
    result = chunks_search(
        reader=OPERATOR, query=question, mode=mode, top_k=2, query_vector=query_vector
    )
    assert [c.document_title for c in result.chunks] == ["Older", "Newer"]

    # The "Older" document was updated since (re-ingested, re-enabled, retitled): it wins.
    set_updated(newer, days_ago=3)
    result = chunks_search(
        reader=OPERATOR, query=question, mode=mode, top_k=2, query_vector=query_vector
    )
    assert [c.document_title for c in result.chunks] == ["Older", "Newer"]
    set_updated(newer, days_ago=0)
    set_updated(older, days_ago=3)
    result = chunks_search(
        reader=OPERATOR, query=question, mode=mode, top_k=2, query_vector=query_vector
    )
    assert [c.document_title for c in result.chunks] == ["Newer", "Older"]
    # Only the first place was asked for: the tie is settled before the cut.
    result = chunks_search(
        reader=OPERATOR, query=question, mode=mode, top_k=1, query_vector=query_vector
    )
    assert [c.document_title for c in result.chunks] == ["Newer"]


def test_a_clearly_better_chunk_of_an_older_document_keeps_its_place():
    target = unit(basis(3))
    better = document_create(
        title="Better",
        texts=["Pallets are stacked at most three high."],
        vectors=[unit(target + 0.30 * basis(4))],
    )
    worse = document_create(
        title="Worse",
        texts=["Pallets are wrapped in film before shipping."],
        vectors=[unit(target + 0.33 * basis(5))],
    )
    set_updated(better, days_ago=30)
    set_updated(worse, days_ago=0)

    result = chunks_search(
        reader=OPERATOR,
        query="How high are pallets stacked?",
        mode="vector",
        top_k=2,
        query_vector=target,
    )

    assert [c.document_title for c in result.chunks] == ["Better", "Worse"]
    similarities = [c.similarity for c in result.chunks]
    assert similarities[0] - similarities[1] > RECENCY_MARGIN * similarities[0]


def test_recency_tie_break_reorders_only_runs_within_the_margin():
    old = document_create(title="Old", texts=["alpha", "beta"], vectors=np.eye(384)[:2])
    new = document_create(title="New", texts=["gamma", "delta"], vectors=np.eye(384)[2:4])
    set_updated(old, days_ago=10)
    a, b = old.chunks.order_by("index").values_list("pk", flat=True)
    c, d = new.chunks.order_by("index").values_list("pk", flat=True)
    ranked = [(a, 1.0), (c, 0.9995), (b, 0.9), (d, 0.8999)]

    assert recency_tie_break(ranked, limit=4) == [(c, 0.9995), (a, 1.0), (d, 0.8999), (b, 0.9)]
    # Runs starting beyond the limit are left as they are.
    assert recency_tie_break(ranked, limit=1) == [(c, 0.9995), (a, 1.0), (b, 0.9), (d, 0.8999)]
    # Scores further apart than the margin are never reordered.
    apart = [(a, 1.0), (c, 0.99), (b, 0.9), (d, 0.85)]
    assert recency_tie_break(apart, limit=4) == apart


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2026, 11, 29, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 11, 30, 0, 30, tzinfo=ZoneInfo("Europe/Paris")),  # 23:30 UTC the day before
        datetime(2024, 2, 29, 12, tzinfo=UTC),
        datetime(1, 1, 1, 12, tzinfo=UTC),
    ],
)
def test_the_day_of_a_chunks_document_is_its_utc_date_as_python_counts_it(moment):
    document = document_create(title="Dated", texts=["alpha"], vectors=np.eye(384)[:1])
    Document.objects.filter(pk=document.pk).update(updated_at=moment)
    chunk_id = document.chunks.get().pk
    days: dict[int, int] = {}

    days_read([chunk_id], days)

    assert days == {chunk_id: moment.astimezone(UTC).date().toordinal()}
