"""The documents as the chat reads them: the list a user may read (the one read rule), the ids
of a filter naming none they may read, and whether a cited document's original file can still
be opened."""

from __future__ import annotations

from collections.abc import Iterable

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import DEFAULT_DB_ALIAS, connection
from django.db.models import (
    Count,
)

from knowledge.access import (
    Reader,
    documents_readable,
    personal_files_filter,
    reader_for,
)
from knowledge.models import Document
from knowledge.selectors import (
    document_error_for,
    document_original_path,
    document_source_label,
    documents_visible_to,
)
from knowledge.sql_arrays import bigint_array


def documents_list(user: AbstractBaseUser) -> list[dict]:
    """The documents `user` may read (`documents_visible_to`, the one read rule) with their
    collection's name and chunk counts, by title: the source as a file name or URL, never a
    path on the server; the processing error as `user` may read it (`document_error_for`).
    The organisation's documents only: personal files are listed by their own API
    (chat/api/files.py)."""
    documents = (
        documents_visible_to(reader_for(user))
        .exclude(personal_files_filter())
        .annotate(chunk_count=Count("chunks"))
    )
    return [
        {
            "id": document.pk,
            "title": document.title,
            "collection": document.collection.name,
            "source": document_source_label(document.source),
            "media_type": document.media_type,
            "status": document.status,
            "reprocessing": document.reprocessing_since is not None,
            "error": document_error_for(user, document),
            "enabled": document.enabled,
            "expires_at": document.expires_at,
            "is_expired": document.is_expired,
            "chunk_count": document.chunk_count,
            "url": document.url,
            "created_at": document.created_at,
            "updated_at": document.updated_at,
        }
        for document in documents
    ]


def unknown_document_ids(document_ids: list[int], *, reader: Reader) -> list[int]:
    """The ids of `document_ids` naming no document `reader` may read (sorted): to them, a
    document they may not read does not exist."""
    known = set(
        documents_readable(user=reader).filter(pk__in=document_ids).values_list("pk", flat=True)
    )
    return sorted(set(document_ids) - known)


def documents_file_state(document_ids: Iterable[int | None]) -> dict[int, bool]:
    """{document id: its original file can be opened} for the documents of `document_ids`
    that still exist, a purged personal file being gone (one query; none when there are no
    ids)."""
    ids = {pk for pk in document_ids if pk}
    if not ids:
        return {}
    # Written out: it runs twice at the end of every answer
    # (docs/decisions/0152-statements-written-out.md).
    with connection.cursor() as cursor:
        cursor.execute(_FILE_STATE_SQL, [bigint_array(sorted(ids))])
        rows = cursor.fetchall()
    documents = [Document.from_db(DEFAULT_DB_ALIAS, _FILE_STATE_FIELDS, row) for row in rows]
    return {document.pk: document_original_path(document) is not None for document in documents}


# What `document_original_path` reads, in the model's field order (`Model.from_db`'s).
_FILE_STATE_FIELDS = [
    field.attname
    for field in Document._meta.concrete_fields
    if field.attname in {"id", "file", "source", "sync_root"}
]
_FILE_STATE_SQL = (
    f"SELECT {', '.join(_FILE_STATE_FIELDS)} FROM {Document._meta.db_table} "  # noqa: S608
    "WHERE id = ANY(%s::bigint[]) AND purged_at IS NULL"
)
