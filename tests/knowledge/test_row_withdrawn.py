"""Chunks and embeddings carry when their document is withdrawn from searches, kept equal to the
document's state by the database (migration 0020's triggers) whatever writes it: a plain
UPDATE of the document, a row written with another value, chunks replaced by re-ingestion, the
migration itself for the rows it finds. Retrieval tests availability on that copy, so a copy out
of step would search a disabled document or hide an available one
(docs/decisions/0179-the-row-knows-when-it-is-withdrawn.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from knowledge.access import OPERATOR, reader_for
from knowledge.models import Chunk, Document, Embedding
from knowledge.retrieval import chunks_search
from knowledge.vector_search import exact_search_suits
from tests.support.knowledge_base import (
    EXPENSES_TEXTS,
    LEAVE_TEXTS,
    chunks_replace,
    document_create,
)
from tests.support.migrations import migrate

pytestmark = pytest.mark.django_db

WITHDRAWN = datetime(1970, 1, 1, tzinfo=UTC)


def _rows_withdrawn_at(document: Document) -> tuple[set, set]:
    chunks = set(Chunk.objects.filter(document=document).values_list("withdrawn_at", flat=True))
    embeddings = set(
        Embedding.objects.filter(chunk__document=document).values_list("withdrawn_at", flat=True)
    )
    return chunks, embeddings


def _document_update(document: Document, **columns: object) -> None:
    """A plain UPDATE of the document, as any writer (a script, the shell) could run it."""
    assignments = ", ".join(f"{name} = %s" for name in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE knowledge_document SET {assignments} WHERE id = %s",  # noqa: S608
            [*columns.values(), document.pk],
        )


def _searched(titles_of: str, reader) -> set[str]:
    result = chunks_search(query="annual leave days", reader=reader, top_k=10)
    return {chunk.document_title for chunk in result.chunks} & {titles_of}


def test_rows_are_written_with_their_documents_state():
    later = timezone.now() + timedelta(days=30)
    available = document_create(title="Leave", texts=LEAVE_TEXTS)
    disabled = document_create(title="Off", texts=LEAVE_TEXTS, enabled=False)
    failed = document_create(title="Failed", texts=LEAVE_TEXTS, status="failed")
    expiring = Document.objects.create(title="Soon", source="soon.md", expires_at=later)
    Document.objects.filter(pk=expiring.pk).update(status=Document.Status.READY)
    chunks_replace(expiring, texts=EXPENSES_TEXTS)

    assert _rows_withdrawn_at(available) == ({None}, {None})
    assert _rows_withdrawn_at(disabled) == ({WITHDRAWN}, {WITHDRAWN})
    assert _rows_withdrawn_at(failed) == ({WITHDRAWN}, {WITHDRAWN})
    assert _rows_withdrawn_at(expiring) == ({later}, {later})


def test_a_plain_update_of_the_document_changes_every_row_at_once():
    document = document_create(title="Leave", texts=LEAVE_TEXTS)
    other = document_create(title="Expenses", texts=EXPENSES_TEXTS)
    later = timezone.now() + timedelta(days=30)

    _document_update(document, enabled=False)
    assert _rows_withdrawn_at(document) == ({WITHDRAWN}, {WITHDRAWN})
    _document_update(document, enabled=True)
    assert _rows_withdrawn_at(document) == ({None}, {None})
    _document_update(document, expires_at=later)
    assert _rows_withdrawn_at(document) == ({later}, {later})
    _document_update(document, status="failed")
    assert _rows_withdrawn_at(document) == ({WITHDRAWN}, {WITHDRAWN})
    _document_update(document, status="ready", expires_at=None)
    assert _rows_withdrawn_at(document) == ({None}, {None})
    assert _rows_withdrawn_at(other) == ({None}, {None})


def test_a_row_cannot_be_given_another_state():
    document = document_create(title="Off", texts=LEAVE_TEXTS, enabled=False)

    Chunk.objects.filter(document=document).update(withdrawn_at=None)
    Embedding.objects.filter(document=document).update(withdrawn_at=None)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO knowledge_embedding (chunk_id, vector, model, withdrawn_at) "
            "SELECT c.id, e.vector, 'another-model', NULL FROM knowledge_chunk c "
            "JOIN knowledge_embedding e ON e.chunk_id = c.id WHERE c.document_id = %s",
            [document.pk],
        )

    assert _rows_withdrawn_at(document) == ({WITHDRAWN}, {WITHDRAWN})


def test_chunks_replaced_for_a_disabled_document_are_written_withdrawn():
    document = document_create(title="Leave", texts=LEAVE_TEXTS)
    Document.objects.filter(pk=document.pk).update(enabled=False)

    chunks_replace(document, texts=EXPENSES_TEXTS)

    assert _rows_withdrawn_at(document) == ({WITHDRAWN}, {WITHDRAWN})


def test_a_document_disabled_or_expired_leaves_the_next_search_on_both_plans():
    document_create(title="Expenses", texts=EXPENSES_TEXTS)
    leave = document_create(title="Leave", texts=LEAVE_TEXTS)
    staff = reader_for(get_user_model().objects.create_user(username="staff", is_staff=True))
    readers = ((OPERATOR, False), (staff, True))
    for reader, exact in readers:
        assert exact_search_suits(reader=reader) is exact
        assert _searched("Leave", reader) == {"Leave"}

    Document.objects.filter(pk=leave.pk).update(enabled=False)
    assert [_searched("Leave", reader) for reader, _ in readers] == [set(), set()]

    Document.objects.filter(pk=leave.pk).update(enabled=True)
    assert [_searched("Leave", reader) for reader, _ in readers] == [{"Leave"}, {"Leave"}]

    # Expiry is a moment, not a write: the rows carry it and the search compares it with now.
    Document.objects.filter(pk=leave.pk).update(expires_at=timezone.now() + timedelta(hours=1))
    assert [_searched("Leave", reader) for reader, _ in readers] == [{"Leave"}, {"Leave"}]
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE knowledge_document SET expires_at = statement_timestamp() WHERE id = %s",
            [leave.pk],
        )
    assert [_searched("Leave", reader) for reader, _ in readers] == [set(), set()]


BEFORE = [("knowledge", "0019_the_reader_reads_its_own_collections")]
AFTER = [("knowledge", "0020_row_withdrawn_at")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_marks_the_rows_of_documents_already_withdrawn(latest_schema_after):
    later = timezone.now() + timedelta(days=30)
    old_apps = migrate(BEFORE)
    try:
        OldDocument = old_apps.get_model("knowledge", "Document")
        OldChunk = old_apps.get_model("knowledge", "Chunk")
        OldEmbedding = old_apps.get_model("knowledge", "Embedding")
        states = {
            "available": {"status": "ready"},
            "disabled": {"status": "ready", "enabled": False},
            "failed": {"status": "failed"},
            "expiring": {"status": "ready", "expires_at": later},
        }
        for title, state in states.items():
            document = OldDocument.objects.create(title=title, source=f"{title}.md", **state)
            chunk = OldChunk.objects.create(document=document, index=0, text=title)
            OldEmbedding.objects.create(chunk=chunk, vector=[0.1] * 384, model="m")
    finally:
        new_apps = migrate(AFTER)

    Chunk = new_apps.get_model("knowledge", "Chunk")
    Embedding = new_apps.get_model("knowledge", "Embedding")
    expected = {"available": None, "disabled": WITHDRAWN, "failed": WITHDRAWN, "expiring": later}
    assert dict(Chunk.objects.values_list("document__title", "withdrawn_at")) == expected
    assert dict(Embedding.objects.values_list("chunk__document__title", "withdrawn_at")) == expected
