"""What a reader may search: the documents and chunks the one read rule (knowledge/access.py)
lets them read that are enabled, ready and not expired, as querysets and as the filter both
sides of retrieval put inside their SQL; and whether the knowledge base holds anything to search."""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from knowledge.access import (
    Reader,
    documents_readable_filter,
    documents_searchable_sql,
    reader_required,
)
from knowledge.models import Chunk, Document
from knowledge.sql_arrays import bigint_array


def not_expired(prefix: str = "") -> Q:
    """Documents (through `prefix`, e.g. "chunk__document__") without an expiry in the past."""
    return Q(**{f"{prefix}expires_at__isnull": True}) | Q(
        **{f"{prefix}expires_at__gt": timezone.now()}
    )


def _searchable(*, reader: Reader, prefix: str = "") -> Q:
    """Documents (through `prefix`) that are searched for `reader`: those they may read that
    are available (enabled, ready and not expired; withdrawn ones are never searched, even for
    those who may read them). Through a prefix (chunks, embeddings), the collection is tested
    on the row's own copy, so the k-NN and full-text scans drop unreadable rows before they
    reach the document (docs/decisions/0077-the-collection-on-every-searched-row.md)."""
    reader_required(reader)
    return documents_readable_filter(
        user=reader,
        prefix=prefix,
        collection_field="collection_id" if prefix else None,
        searching=True,
    )


def searchable_documents(*, reader: Reader) -> QuerySet[Document]:
    """The documents whose chunks are searched for `reader` (`searchable_chunks`)."""
    return Document.objects.filter(_searchable(reader=reader))


def documents_searched_among(reader: Reader, document_ids: Iterable[int]) -> set[int]:
    """Those of `document_ids` whose chunks are searched for `reader` (`searchable_documents`),
    in one statement written out (it confirms a named document for every question that names
    one: docs/decisions/0152-statements-written-out.md); no statement when there are no ids."""
    ids = sorted({int(pk) for pk in document_ids})
    if not ids:
        return set()
    table = Document._meta.db_table
    condition, params = documents_searchable_sql(reader=reader, alias=table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {table} WHERE id = ANY(%s::bigint[]) AND {condition}",  # noqa: S608
            [bigint_array(ids), *params],
        )
        return {pk for (pk,) in cursor.fetchall()}


def searchable_chunks(
    *, reader: Reader, document_ids: Iterable[int] | None = None, searchable: Q | None = None
) -> QuerySet[Chunk]:
    """Chunks of the documents searched for `reader` (optionally only of the given
    documents). `searchable`: the rows' filter for `reader` already built by the caller
    (`rows_searchable_filter`, once per search)."""
    if searchable is None:
        searchable = rows_searchable_filter(reader=reader)
    queryset = Chunk.objects.filter(searchable)
    if document_ids is not None:
        queryset = queryset.filter(document_id__in=list(document_ids))
    return queryset


def rows_searchable_filter(*, reader: Reader) -> Q:
    """The filter on chunks and embeddings (their own collection and document columns) of the
    rows searched for `reader`: built once per search and passed to its queries."""
    return _searchable(reader=reader, prefix="document__")


def knowledge_base_is_empty(*, reader: Reader) -> bool:
    """Whether nothing is searched for `reader`: for someone who may read only some
    collections, empty when those are, whatever the others hold."""
    return not searchable_chunks(reader=reader).exists()
