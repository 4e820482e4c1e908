"""Chunks and embeddings carry their document's collection, kept equal to it by the database
(migration 0007's triggers), whatever writes the rows: a move through the service, a plain
UPDATE of the document, a row written with another collection, chunks replaced by
re-ingestion. Retrieval filters on that copy, so a copy out of step would leak or hide text."""

from __future__ import annotations

import numpy as np
import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from knowledge import embedding, vector_search
from knowledge.access import OPERATOR, reader_for
from knowledge.collections import collection_create, collection_default, documents_move
from knowledge.models import Chunk, Document, Embedding
from knowledge.retrieval import chunks_search
from knowledge.vector_search import chunks_search_vector
from tests.support.knowledge_base import (
    EXPENSES_TEXTS,
    LEAVE_TEXTS,
    chunks_replace,
    document_create,
)

pytestmark = pytest.mark.django_db


def _row_collections(document: Document) -> tuple[set[int], set[int]]:
    chunks = set(Chunk.objects.filter(document=document).values_list("collection_id", flat=True))
    embeddings = set(
        Embedding.objects.filter(chunk__document=document).values_list("collection_id", flat=True)
    )
    return chunks, embeddings


@pytest.fixture
def restricted():
    return collection_create(name="HR only", groups=[Group.objects.create(name="HR")])


def test_rows_written_without_a_collection_take_their_documents(restricted):
    document = document_create(title="Pay", texts=LEAVE_TEXTS, collection=restricted)

    assert _row_collections(document) == ({restricted.pk}, {restricted.pk})


def test_a_move_through_the_service_moves_every_row(restricted):
    document = document_create(title="Leave", texts=LEAVE_TEXTS)
    assert _row_collections(document) == ({collection_default().pk}, {collection_default().pk})

    assert documents_move(ids=[document.pk], collection=restricted) == 1

    assert _row_collections(document) == ({restricted.pk}, {restricted.pk})


def test_a_plain_update_of_the_document_moves_every_row(restricted):
    document = document_create(title="Leave", texts=LEAVE_TEXTS)
    other = document_create(title="Expenses", texts=EXPENSES_TEXTS)

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE knowledge_document SET collection_id = %s WHERE id = %s",
            [restricted.pk, document.pk],
        )

    assert _row_collections(document) == ({restricted.pk}, {restricted.pk})
    general = collection_default().pk
    assert _row_collections(other) == ({general}, {general})


def test_a_row_cannot_be_given_another_collection(restricted):
    document = document_create(title="Pay", texts=LEAVE_TEXTS, collection=restricted)
    general = collection_default().pk

    Chunk.objects.filter(document=document).update(collection_id=general)
    Embedding.objects.filter(chunk__document=document).update(collection_id=general)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO knowledge_embedding (chunk_id, vector, model, collection_id) "
            "SELECT c.id, e.vector, 'another-model', %s FROM knowledge_chunk c "
            "JOIN knowledge_embedding e ON e.chunk_id = c.id WHERE c.document_id = %s",
            [general, document.pk],
        )

    assert _row_collections(document) == ({restricted.pk}, {restricted.pk})


def test_chunks_replaced_after_a_move_are_written_in_the_new_collection(restricted):
    document = document_create(title="Leave", texts=LEAVE_TEXTS)
    documents_move(ids=[document.pk], collection=restricted)

    chunks_replace(document, texts=EXPENSES_TEXTS)

    assert _row_collections(document) == ({restricted.pk}, {restricted.pk})


def test_a_moved_document_is_searched_by_its_new_readers_only(django_user_model, restricted):
    document = document_create(title="Expenses", texts=EXPENSES_TEXTS)
    outsider = reader_for(django_user_model.objects.create_user(username="outsider", is_staff=True))
    question = "What is the daily meal allowance while travelling?"

    def found(reader) -> bool:
        result = chunks_search(query=question, reader=reader, top_k=3, mode="hybrid")
        return any(chunk.document_id == document.pk for chunk in result.chunks)

    assert found(outsider)
    documents_move(ids=[document.pk], collection=restricted)
    assert not found(outsider)
    for mode in ("vector", "lexical"):
        result = chunks_search(query=question, reader=outsider, top_k=3, mode=mode)
        assert all(chunk.document_id != document.pk for chunk in result.chunks)


def _ranked(reader, vector, *, limit: int = 8) -> list[int]:
    return [
        chunk_id
        for chunk_id, _ in chunks_search_vector(query_vector=vector, limit=limit, reader=reader)
    ]


def test_a_reader_of_few_rows_is_searched_row_by_row_with_the_same_ranking(
    django_user_model, monkeypatch, restricted
):
    texts = [*LEAVE_TEXTS, *EXPENSES_TEXTS]
    for number in range(4):
        document_create(title=f"Policy {number}", texts=texts)
    document_create(title="Pay", texts=texts, collection=restricted)
    reader = reader_for(django_user_model.objects.create_user(username="staff", is_staff=True))
    vector = embedding.embed_texts(["How many days of annual leave do I get?"])[0]

    monkeypatch.setattr(vector_search, "EXACT_SEARCH_MAX_ROWS", 0)
    assert not vector_search.exact_search_suits(reader=reader)
    through_index = _ranked(reader, vector)
    monkeypatch.setattr(vector_search, "EXACT_SEARCH_MAX_ROWS", 1000)
    assert vector_search.exact_search_suits(reader=reader)
    row_by_row = _ranked(reader, vector)

    assert row_by_row == through_index
    restricted_chunks = set(
        Chunk.objects.filter(collection=restricted).values_list("pk", flat=True)
    )
    assert len(row_by_row) == 8 and not set(row_by_row) & restricted_chunks


def test_the_row_by_row_plan_does_not_use_the_vector_index(django_user_model, restricted):
    document_create(title="Leave", texts=LEAVE_TEXTS)
    document_create(title="Pay", texts=LEAVE_TEXTS, collection=restricted)
    reader = reader_for(django_user_model.objects.create_user(username="staff", is_staff=True))
    vector = embedding.embed_texts(["annual leave"])[0]

    def plan(exact: bool) -> str:
        sql, params = vector_search.vector_search_sql(
            query_vector=vector, limit=5, reader=reader, exact=exact
        )
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL enable_sort = off")
            cursor.execute(f"EXPLAIN {sql}", params)
            return "\n".join(row[0] for row in cursor.fetchall())

    assert "embedding_vector_hnsw" in plan(exact=False)
    assert "embedding_vector_hnsw" not in plan(exact=True)


def test_an_operator_is_always_searched_through_the_index():
    assert not vector_search.exact_search_suits(reader=OPERATOR)


def test_every_embedding_carries_its_vectors_signs(restricted):
    document_create(title="Leave", texts=LEAVE_TEXTS)
    for vector, bits in Embedding.objects.values_list("vector", "vector_bits"):
        assert str(bits) == "".join("1" if value > 0 else "0" for value in vector)


def test_the_row_by_row_search_compares_in_full_the_rows_nearest_by_their_signs(
    django_user_model, monkeypatch, restricted
):
    for number in range(3):
        document_create(title=f"Policy {number}", texts=[*LEAVE_TEXTS, *EXPENSES_TEXTS])
    document_create(title="Pay", texts=EXPENSES_TEXTS, collection=restricted)
    reader = reader_for(django_user_model.objects.create_user(username="staff", is_staff=True))
    vector = embedding.embed_texts(["Who approves travel expenses?"])[0]
    monkeypatch.setattr(vector_search, "EXACT_SHORTLIST_FACTOR", 1)
    limit = 3

    signs = "".join("1" if value > 0 else "0" for value in vector.tolist())
    rows = Embedding.objects.exclude(collection=restricted).values_list(
        "chunk_id", "vector", "vector_bits"
    )
    by_signs = sorted(
        rows, key=lambda row: (sum(a != b for a, b in zip(str(row[2]), signs, strict=True)), row[0])
    )
    assert len(by_signs) > limit  # the shortlist leaves rows out
    shortlist = by_signs[:limit]
    nearest = sorted(shortlist, key=lambda row: -float(np.asarray(row[1]) @ vector))[:limit]

    sql, params = vector_search.vector_search_sql(
        query_vector=vector, limit=limit, reader=reader, exact=True
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    assert {chunk_id for chunk_id, _ in found} == {row[0] for row in nearest}


@pytest.mark.django_db(transaction=True)
def test_the_row_by_row_shortlist_reads_the_signs_index_alone(django_user_model):
    restricted = collection_create(name="HR only", groups=[Group.objects.create(name="HR")])
    document_create(title="Leave", texts=LEAVE_TEXTS)
    document_create(title="Pay", texts=LEAVE_TEXTS, collection=restricted)
    reader = reader_for(django_user_model.objects.create_user(username="staff", is_staff=True))
    vector = embedding.embed_texts(["annual leave"])[0]
    sql, params = vector_search.vector_search_sql(
        query_vector=vector, limit=5, reader=reader, exact=True
    )
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE knowledge_embedding")  # the visibility map, as autovacuum
        cursor.execute(
            f"SET enable_seqscan = off; SET enable_bitmapscan = off; EXPLAIN {sql}", params
        )
        cursor.nextset()
        cursor.nextset()
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan; RESET enable_bitmapscan")
    assert "Index Only Scan using embedding_collection_bits" in plan


def test_the_shortlist_grows_with_the_rows_searched():
    factor, share = vector_search.EXACT_SHORTLIST_FACTOR, vector_search.EXACT_SHORTLIST_SHARE
    assert vector_search.exact_shortlist_size(40, 0) == factor * 40
    many = int(2 * factor * 40 / share)
    assert vector_search.exact_shortlist_size(40, many) == 2 * factor * 40


def test_the_rows_a_reader_may_search_are_counted_up_to_the_row_by_row_bound(
    django_user_model, monkeypatch, restricted
):
    document_create(title="Leave", texts=LEAVE_TEXTS)
    document_create(title="Pay", texts=LEAVE_TEXTS, collection=restricted)
    reader = reader_for(django_user_model.objects.create_user(username="staff", is_staff=True))
    readable = Embedding.objects.exclude(collection=restricted).count()

    assert vector_search.searchable_rows_count(reader=reader) == readable
    monkeypatch.setattr(vector_search, "EXACT_SEARCH_MAX_ROWS", readable - 1)
    assert vector_search.searchable_rows_count(reader=reader) is None
    assert vector_search.searchable_rows_count(reader=OPERATOR) is None


def test_a_count_of_searchable_rows_is_kept_for_a_while_and_only_chooses_the_plan(
    django_user_model, monkeypatch
):
    document_create(title="Leave", texts=LEAVE_TEXTS)
    reader = reader_for(django_user_model.objects.create_user(username="staff", is_staff=True))
    counted = vector_search.searchable_rows_count(reader=reader)
    document_create(title="Expenses", texts=EXPENSES_TEXTS)
    vector = embedding.embed_texts(["Who approves travel expenses?"])[0]

    with CaptureQueriesContext(connection) as queries:
        assert vector_search.searchable_rows_count(reader=reader) == counted  # kept: no query
    assert len(queries) == 0
    # The stale count never hides a row: the new document's rows are searched.
    expenses = set(Chunk.objects.filter(document__title="Expenses").values_list("pk", flat=True))
    assert set(_ranked(reader, vector, limit=3)) & expenses

    monkeypatch.setattr(vector_search, "ROWS_COUNT_SECONDS", 0.0)
    assert vector_search.searchable_rows_count(reader=reader) == Embedding.objects.count()
    vector_search.searchable_rows_forget()
    monkeypatch.undo()
    with CaptureQueriesContext(connection) as queries:
        vector_search.searchable_rows_count(reader=reader)
    assert len(queries) == 1
