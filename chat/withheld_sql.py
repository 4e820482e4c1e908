"""The rows behind `chat.withheld.messages_withheld` for a reader of some collections, in one
hand-written statement: what each message drew on (its `DocumentGiven` record and its
citations) that the reader may not read, with whether the document is in a collection they
read and whether it still exists (docs/decisions/0151-one-reader-per-question.md).

The rule itself is not written here: both conditions are
`knowledge.access.readable_document_row_sql` (the rule's SQL form on the document row joined),
for the reader and for the same reader as if they managed documents.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace

from django.db import connection

from chat.models import Citation, DocumentGiven, Message
from knowledge.access import Reader, readable_document_row_sql
from knowledge.models import Chunk, Document
from knowledge.sql_arrays import uuid_array


def _table(model: type) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def withheld_exists_sql(reader: Reader, *, message: str) -> tuple[str, list]:
    """An SQL condition, and its parameters, true when the message whose id is the column
    `message` of the caller's query drew on a document `reader` may not read: whether
    `withheld_rows(reader, message_ids=[that id])` has a row (`messages_withheld` then withholds
    it), for a reader of some collections (not a superuser, not one who reads nothing)."""
    readable, params = readable_document_row_sql(user=reader, alias="wd")
    sql = (
        f"EXISTS (SELECT 1 FROM ({_drawn_sql(f'WHERE x.message_id = {message}')}) wdrawn "
        f"LEFT JOIN {_table(Document)} wd ON wd.id = wdrawn.doc "
        f"WHERE NOT COALESCE({readable}, FALSE))"
    )
    return sql, params


def _drawn_sql(where: str) -> str:
    """(message_id, doc): each document a message drew on, its `DocumentGiven` rows and what
    it cites (the citation's document snapshot, else its chunk's document; NULL when neither
    is known), of the messages `where` (a WHERE clause on `x`, the record or the citation)
    selects."""
    return (
        f"SELECT x.message_id, x.document_id AS doc FROM {_table(DocumentGiven)} x {where} "
        f"UNION ALL SELECT x.message_id, COALESCE(x.document_id_snapshot, ch.document_id) "
        f"FROM {_table(Citation)} x LEFT JOIN {_table(Chunk)} ch ON ch.id = x.chunk_id {where}"
    )


def withheld_rows(
    reader: Reader,
    *,
    conversation_id: uuid.UUID | str | None = None,
    message_ids: Sequence[uuid.UUID] | None = None,
) -> list[tuple[uuid.UUID, bool, bool]]:
    """(message id, in a collection `reader` reads, exists) for each document a selected
    message drew on (its `DocumentGiven` rows, and what it cites: the citation's document
    snapshot, else its chunk's document; NULL when neither is known) that `reader` may not read
    (`knowledge.access`; an unknown or deleted document is never readable). Messages selected
    by `conversation_id` and/or `message_ids` (both None: every message)."""
    readable, readable_params = readable_document_row_sql(user=reader, alias="d")
    in_collection, in_collection_params = readable_document_row_sql(
        user=replace(reader, can_manage=True), alias="d"
    )
    conditions, params = [], []
    if conversation_id is not None:
        conditions.append(
            f"x.message_id IN (SELECT id FROM {_table(Message)} WHERE conversation_id = %s)"
        )
        params.append(str(conversation_id))
    if message_ids is not None:
        conditions.append("x.message_id = ANY(%s::uuid[])")
        params.append(uuid_array(message_ids))
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    sql = (
        f"SELECT drawn.message_id, COALESCE({in_collection}, FALSE), d.id IS NOT NULL "
        f"FROM ({_drawn_sql(where)}) drawn "
        f"LEFT JOIN {_table(Document)} d ON d.id = drawn.doc "
        f"WHERE NOT COALESCE({readable}, FALSE)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*in_collection_params, *params, *params, *readable_params])
        return [(uuid.UUID(str(m)), bool(c), bool(e)) for m, c, e in cursor.fetchall()]
