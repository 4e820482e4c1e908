"""The one rule of who may read which document (knowledge/access.py), in each of its forms:
every kind of reader × documents in an all-staff and in a restricted collection, available,
disabled, expired and not processed; the queryset, the predicate, the SQL condition and the
chunk/embedding filters agree; revocation is seen by the next call."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.contrib.auth.models import AnonymousUser, Group, Permission
from django.db import connection
from django.utils import timezone
from pgvector.django import CosineDistance

from knowledge.access import (
    NOBODY,
    OPERATOR,
    Reader,
    collections_readable,
    document_readable,
    documents_available_filter,
    documents_readable,
    documents_readable_filter,
    documents_withdrawn,
    readable_document_row_sql,
    reader_for,
    reader_searching,
    rows_searchable_sql,
    user_manages_documents,
)
from knowledge.collections import (
    collection_create,
    collection_default,
    collection_readers_revoke,
    documents_move,
)
from knowledge.models import Chunk, Collection, Document, Embedding, collection_personal_id
from knowledge.search_scope import (
    documents_searched_among,
    searchable_chunks,
    searchable_documents,
)
from knowledge.vector_search import vector_search_sql
from tests.support.knowledge_base import basis, document_create
from tests.support.personal import personal_file_create

pytestmark = pytest.mark.django_db

# Which documents each reader reads. The documents: "<collection> <state>", the collection
# readable by all staff ("general") or by the HR group and one named user ("hr").
STATES = ("available", "disabled", "expired", "failed")
DOCUMENTS = [f"{collection} {state}" for collection in ("general", "hr") for state in STATES]
EXPECTED = {
    "anonymous": set(),
    "non-staff": set(),
    "inactive staff": set(),
    "staff": {"general available"},
    "reader by group": {"general available", "hr available"},
    "reader by user": {"general available", "hr available"},
    "document manager": {f"general {state}" for state in STATES},
    "document manager in the group": set(DOCUMENTS),
    "superuser": set(DOCUMENTS),
}


@pytest.fixture
def hr_group():
    return Group.objects.create(name="HR")


@pytest.fixture
def readers(django_user_model, hr_group):
    def staff(username: str, **fields):
        return django_user_model.objects.create_user(username=username, is_staff=True, **fields)

    view_document = Permission.objects.get(codename="view_document")
    change_document = Permission.objects.get(codename="change_document")
    by_group = staff("in-hr")
    by_group.groups.add(hr_group)
    manager = staff("manager")
    manager.user_permissions.add(change_document)
    managers = Group.objects.create(name="Document managers")
    managers.permissions.add(view_document)
    manager_in_hr = staff("manager-in-hr")
    manager_in_hr.groups.add(hr_group, managers)
    inactive = staff("gone", is_active=False)
    inactive.groups.add(hr_group)
    return {
        "anonymous": AnonymousUser(),
        "non-staff": django_user_model.objects.create_user(username="visitor"),
        "inactive staff": inactive,
        "staff": staff("staff"),
        "reader by group": by_group,
        "reader by user": staff("named"),
        "document manager": manager,
        "document manager in the group": manager_in_hr,
        "superuser": django_user_model.objects.create_superuser(
            username="root", email="", password=None
        ),
    }


@pytest.fixture
def hr(readers, hr_group):
    return collection_create(name="HR only", groups=[hr_group], users=[readers["reader by user"]])


@pytest.fixture
def documents(hr) -> dict[str, Document]:
    general = collection_default()
    made = {}
    for axis, title in enumerate(DOCUMENTS):
        name, state = title.split(" ")
        document = document_create(
            title=title,
            texts=[f"Passage of {title}."],
            vectors=[basis(axis)],
            enabled=state != "disabled",
            status=Document.Status.FAILED if state == "failed" else Document.Status.READY,
        )
        if state == "expired":
            document.expires_at = timezone.now() - timedelta(minutes=1)
        document.collection = hr if name == "hr" else general
        document.save()
        made[title] = document
    return made


def titles(queryset) -> set[str]:
    return set(queryset.values_list("title", flat=True))


def titles_by_row_sql(user) -> set[str]:
    """The documents `readable_document_row_sql` passes on a joined row, and no unknown id:
    every document id and one naming no document, each joined to its row (if any)."""
    condition, params = readable_document_row_sql(user=user, alias="d")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.title, wanted.id FROM (SELECT id FROM knowledge_document UNION ALL "
            "SELECT -1) wanted LEFT JOIN knowledge_document d ON d.id = wanted.id "
            f"WHERE COALESCE({condition}, FALSE)",
            params,
        )
        rows = cursor.fetchall()
    assert all(pk != -1 for _, pk in rows), "an unknown document passed"
    return {title for title, _ in rows}


@pytest.mark.parametrize("who", sorted(EXPECTED))
def test_each_reader_reads_exactly_the_documents_the_rule_gives(readers, documents, who):
    user = readers[who]

    assert titles(documents_readable(user=user)) == EXPECTED[who]
    assert {t for t, d in documents.items() if document_readable(user=user, document=d)} == (
        EXPECTED[who]
    )
    assert titles_by_row_sql(user) == EXPECTED[who]


@pytest.mark.parametrize("who", sorted(EXPECTED))
def test_the_filter_reaches_chunks_and_embeddings_through_their_document(readers, documents, who):
    reader = reader_for(readers[who])

    chunks = Chunk.objects.filter(documents_readable_filter(user=reader, prefix="document__"))
    embeddings = Embedding.objects.filter(
        documents_readable_filter(user=reader, prefix="chunk__document__")
    )

    assert set(chunks.values_list("document__title", flat=True)) == EXPECTED[who]
    assert set(embeddings.values_list("chunk__document__title", flat=True)) == EXPECTED[who]


@pytest.mark.parametrize("who", sorted(EXPECTED))
def test_the_rows_sql_searches_what_the_filter_searches(readers, documents, who):
    """`rows_searchable_sql`, written out for the retrieval queries, selects the same chunks as
    the `Q` of `documents_readable_filter(searching=True)`, with and without a searched file;
    on the documents themselves (`documents_searched_among`), the same documents as
    `searchable_documents`."""
    user = readers[who]
    if getattr(user, "pk", None) is not None:
        personal_file_create(user, title="My notes", texts=["A note of my own."])
    personal_file_create(readers["staff"], title="Their notes", texts=["Someone else's."])
    reader = reader_for(user)
    files = Document.objects.filter(owner__isnull=False).values_list("pk", flat=True)
    for searching in (reader, reader_searching(reader, file_ids=files)):
        by_filter = set(
            Chunk.objects.filter(
                documents_readable_filter(
                    user=searching,
                    prefix="document__",
                    collection_field="collection_id",
                    searching=True,
                )
            ).values_list("pk", flat=True)
        )
        condition, params = rows_searchable_sql(reader=searching, alias="knowledge_chunk")
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT id FROM knowledge_chunk WHERE {condition}", params)
            by_sql = {pk for (pk,) in cursor.fetchall()}
        assert by_sql == by_filter
        every = Document.objects.values_list("pk", flat=True)
        assert documents_searched_among(searching, every) == set(
            searchable_documents(reader=searching).values_list("pk", flat=True)
        )


def test_staff_read_the_available_documents_retrieval_searches(readers, documents):
    """The rule's idea of a withdrawn document is retrieval's: for staff who read every
    collection, the readable documents are exactly the searchable ones."""
    reader = readers["reader by group"]

    assert titles(documents_readable(user=reader)) == titles(searchable_documents(reader=OPERATOR))


def test_a_reader_is_computed_once_and_then_needs_no_query(
    readers, documents, django_assert_num_queries
):
    with django_assert_num_queries(1):
        reader = reader_for(readers["reader by group"])
    with django_assert_num_queries(0):
        assert document_readable(user=reader, document=documents["hr available"])
        readable_document_row_sql(user=reader, alias="d")
        documents_readable_filter(user=reader, prefix="document__")
    assert reader_for(reader) is reader


def test_an_anonymous_visitor_costs_no_query(django_assert_num_queries):
    with django_assert_num_queries(0):
        assert reader_for(AnonymousUser()) == NOBODY
        assert reader_for(None) == NOBODY


@pytest.mark.parametrize("who", sorted(EXPECTED))
def test_who_manages_and_who_reads_nothing(readers, documents, who):
    reader = reader_for(readers[who])

    assert user_manages_documents(reader) == (
        who in {"document manager", "document manager in the group", "superuser"}
    )
    assert reader.reads_nothing == (not EXPECTED[who])


def test_the_sql_condition_is_false_for_nobody_and_a_test_of_the_row_for_a_superuser(readers):
    """A superuser's condition is not TRUE: it leaves out personal files
    (tests/knowledge/test_personal_files.py checks which)."""
    condition, _ = readable_document_row_sql(user=readers["superuser"], alias="d")
    assert condition.startswith("(d.id IS NOT NULL AND ")
    assert readable_document_row_sql(user=readers["anonymous"], alias="d") == ("FALSE", [])
    assert readable_document_row_sql(user=Reader(user_id=1), alias="d") == ("FALSE", [])


def test_removing_a_reader_from_the_group_denies_the_next_call(readers, documents, hr_group):
    reader = readers["reader by group"]
    document = documents["hr available"]
    assert document_readable(user=reader, document=document)

    reader.groups.remove(hr_group)

    assert not document_readable(user=reader, document=document)
    assert "hr available" not in titles(documents_readable(user=reader))
    assert "hr available" not in titles_by_row_sql(reader)


def test_revoking_a_named_reader_denies_the_next_call(readers, documents, hr):
    reader = readers["reader by user"]
    assert "hr available" in titles(documents_readable(user=reader))

    collection_readers_revoke(collection=hr, users=[reader])

    assert "hr available" not in titles(documents_readable(user=reader))


def test_moving_a_document_changes_who_reads_it_on_the_next_call(readers, documents, hr):
    staff = readers["staff"]
    general = documents["general available"]

    documents_move(ids=[general.pk], collection=hr)

    assert "general available" not in titles(documents_readable(user=staff))
    assert "general available" in titles(documents_readable(user=readers["reader by group"]))


def test_flags_and_permissions_are_read_from_the_database_not_the_user_object(
    readers, documents, django_user_model
):
    """A WebSocket keeps its user object for the whole connection: a member of staff whose
    staff flag or document permission is taken away reads accordingly on the next call."""
    manager = readers["document manager"]
    assert "general disabled" in titles(documents_readable(user=manager))

    manager.user_permissions.clear()  # the object's permission cache is not consulted
    assert "general disabled" not in titles(documents_readable(user=manager))

    django_user_model.objects.filter(pk=manager.pk).update(is_staff=False)
    assert reader_for(manager) == NOBODY


def test_a_collection_made_readable_by_all_staff_is_read_by_them_next_call(readers, documents, hr):
    staff = readers["staff"]
    assert "hr available" not in titles(documents_readable(user=staff))

    Collection.objects.filter(pk=hr.pk).update(all_staff=True)

    assert "hr available" in titles(documents_readable(user=staff))


def test_the_personal_collection_is_read_by_no_reader_however_it_is_granted(readers, hr_group, hr):
    """The hidden personal collection holds everyone's personal files: granted to a group, a
    user or all staff by mistake, it still never enters a Reader's collections (each part of
    the Reader's statement leaves it out: docs/decisions/0178)."""
    personal = Collection.objects.get(pk=collection_personal_id())
    personal.reader_groups.add(hr_group)
    personal.reader_users.add(readers["staff"])
    Collection.objects.filter(pk=personal.pk).update(all_staff=True)

    all_staff = set(
        Collection.objects.filter(all_staff=True, is_personal=False).values_list("pk", flat=True)
    )
    assert reader_for(readers["reader by group"]).collection_ids == all_staff | {hr.pk}
    assert reader_for(readers["staff"]).collection_ids == all_staff


def test_collections_readable_lists_what_each_reader_reads(readers, hr):
    general = collection_default()
    assert set(collections_readable(user=readers["staff"])) == {general}
    assert hr in collections_readable(user=readers["reader by user"])
    assert hr in collections_readable(user=readers["superuser"])
    assert not collections_readable(user=readers["non-staff"]).exists()


def test_the_nearest_passages_the_reader_may_not_read_take_no_top_k_place(readers, hr):
    """Filtered inside the query that ranks: with many restricted passages nearest the
    question, a member of staff still gets the k best of what they may read."""
    near, far = basis(0), basis(1)
    restricted = document_create(
        title="Pay bands",
        texts=[f"Grade {n} salary band." for n in range(50)],
        vectors=[near] * 50,
    )
    documents_move(ids=[restricted.pk], collection=hr)
    document_create(
        title="Handbook",
        texts=[f"Handbook passage {n}." for n in range(5)],
        vectors=[(0.2 * near + far) / np.linalg.norm(0.2 * near + far)] * 5,
    )

    for who, expected in (("staff", {"Handbook"}), ("reader by group", {"Pay bands"})):
        rows = (
            Embedding.objects.filter(
                documents_readable_filter(user=readers[who], prefix="chunk__document__")
            )
            .annotate(distance=CosineDistance("vector", near.tolist()))
            .order_by("distance")
            .values_list("chunk__document__title", flat=True)[:5]
        )
        assert len(rows) == 5 and set(rows) == expected


def test_a_document_expiring_later_is_available_until_then(readers, documents):
    """Availability through a prefix is "not one of the withdrawn documents": a document
    with an expiry still ahead (held by the partial index `document_withdrawn`) is searched
    until it passes, and withdrawn from the next call after."""
    document = documents["general available"]
    document.expires_at = timezone.now() + timedelta(minutes=5)
    document.save()
    reader = reader_for(readers["staff"])

    def searched() -> set[str]:
        chunks = Chunk.objects.filter(documents_readable_filter(user=reader, prefix="document__"))
        return set(chunks.values_list("document__title", flat=True))

    assert searched() == {"general available"}
    assert document not in documents_withdrawn()
    Document.objects.filter(pk=document.pk).update(expires_at=timezone.now())
    assert searched() == set()
    assert document in documents_withdrawn()


def test_withdrawn_is_the_complement_of_available(documents):
    withdrawn = titles(documents_withdrawn())
    available = titles(Document.objects.filter(documents_available_filter()))

    assert withdrawn == {t for t in DOCUMENTS if not t.endswith("available")}
    assert withdrawn.isdisjoint(available)
    assert withdrawn | available == set(DOCUMENTS)


def test_a_scan_of_chunks_or_embeddings_tests_availability_without_reading_documents(
    readers, documents
):
    """Availability reaches chunks and embeddings as their own copy of when their document is
    withdrawn: the scans that rank (full-text, k-NN, row by row or through the index) neither
    join the documents table nor read the withdrawn documents
    (docs/decisions/0078-a-shortlist-on-the-vectors-signs.md,
    docs/decisions/0179-the-row-knows-when-it-is-withdrawn.md)."""
    reader = reader_for(readers["reader by group"])
    queries = [str(searchable_chunks(reader=reader).query)]
    for exact in (False, True):
        sql, _ = vector_search_sql(
            query_vector=basis(0), limit=5, reader=reader, exact=exact, rows=100
        )
        queries.append(sql)
    queries.append(rows_searchable_sql(reader=reader, alias="knowledge_chunk")[0])
    for sql in queries:
        assert "knowledge_document" not in sql, sql
        assert "withdrawn_at" in sql, sql
