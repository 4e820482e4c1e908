"""Reads of the knowledge app: what adapters (admin, API, pages) and the services need, and a
spreadsheet's rows laid out as tables again for the document page."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

import numpy as np
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from django.db.models import Q, QuerySet
from django.utils import timezone

from knowledge import embedding
from knowledge.access import UserLike, documents_readable, personal_files_filter
from knowledge.chunking import CHUNKER_VERSION
from knowledge.models import Chunk, Document, SentenceVector
from knowledge.parsers.cells import range_parse
from knowledge.parsers.sheets import CELL_SEPARATOR, LABEL_SEPARATOR, ROW_PREFIX_SEPARATOR
from knowledge.sql_arrays import text_array

IN_PROGRESS = (Document.Status.PENDING, Document.Status.PROCESSING)
# A document waiting or processing for longer than this has stalled (no worker running, or
# the worker was killed mid-document): the admin list stops refreshing for it and it may be
# re-processed.
STALLED_AFTER = timedelta(minutes=15)


def _busy(since: datetime) -> Q:
    """Queued or being processed since `since` or later: a new document's status, or the
    re-processing of a ready one (which stays searchable meanwhile)."""
    return Q(status__in=IN_PROGRESS, updated_at__gte=since) | Q(reprocessing_since__gte=since)


def documents_in_progress(queryset: QuerySet[Document]) -> QuerySet[Document]:
    """Documents queued or being processed right now (stalled ones excluded)."""
    return queryset.filter(_busy(timezone.now() - STALLED_AFTER))


def document_is_stalled(document: Document) -> bool:
    """Queued or processing for longer than STALLED_AFTER: the worker is not running or was
    killed mid-document; re-processing queues it again."""
    cutoff = timezone.now() - STALLED_AFTER
    if document.reprocessing_since is not None:
        return document.reprocessing_since < cutoff
    return (
        document.status in IN_PROGRESS
        and document.updated_at is not None
        and document.updated_at < cutoff
    )


def embeddings_stale() -> QuerySet[Chunk]:
    """Chunks without an embedding under the configured model."""
    return Chunk.objects.exclude(embeddings__model=embedding.model_version())


def sentence_vectors_stale_count() -> int:
    """Sentence vectors stored under another model than the configured one."""
    return SentenceVector.objects.exclude(model=embedding.model_version()).count()


def documents_expired(*, now: datetime | None = None) -> QuerySet[Document]:
    """Documents whose `expires_at` has passed, by pk; never personal files, which are purged
    (their rows kept) by knowledge/personal.py."""
    return (
        Document.objects.filter(expires_at__lte=now or timezone.now())
        .exclude(personal_files_filter())
        .order_by("pk")
    )


def documents_chunker_stale() -> QuerySet[Document]:
    """Ready documents cut into chunks by another chunker than today's (CHUNKER_VERSION), by
    pk: their chunks differ from what ingesting them now would give."""
    return (
        Document.objects.filter(status=Document.Status.READY)
        .exclude(chunker_version=CHUNKER_VERSION)
        .order_by("pk")
    )


def document_original_path(document: Document) -> Path | None:
    """Where the original bytes are, when they can be served (`document_original_open`
    opens them): the uploaded file, else the ingested path."""
    opened = document_original_open(document)
    if opened is None:
        return None
    opened.close()
    location = _original_location(document)
    return location[0] if location is not None else None


def document_original_open(document: Document) -> BinaryIO | None:
    """The original file, open for reading, when it can be served: an upload only from
    inside MEDIA_ROOT, a synced file only from inside its sync root, a file ingested by hand
    only at the path it was read from; never through a symbolic link, checked as the file
    is opened (a file replaced by a link after ingestion is not served). None otherwise.
    Why: docs/decisions/0135-synced-files-read-inside-their-root.md."""
    from knowledge.services.paths import file_open_within

    location = _original_location(document)
    if location is None:
        return None
    path, root = location
    try:
        return file_open_within(path, root=root)
    except OSError:
        return None


def document_original_name(document: Document) -> str:
    """The original file's name, as a download offers it."""
    location = _original_location(document)
    return location[0].name if location is not None else ""


def _original_location(document: Document) -> tuple[Path, Path] | None:
    """(the original's path, the folder it must be read from inside of), or None."""
    if document.file:
        try:
            document.file.path  # noqa: B018 -- only storages on this machine have one
        except (NotImplementedError, ValueError):
            return None
        media = Path(os.path.realpath(settings.MEDIA_ROOT))
        return media / document.file.name, media
    path = Path(document.source) if document.source else None
    if path is None or not path.is_absolute():
        return None
    if document.sync_root:
        return path, Path(document.sync_root)
    return path, Path(path.anchor)


def document_source_label(source: str) -> str:
    """A URL as is; a file path (or an upload's key) by its file name: the server's folders
    are nobody's business."""
    parts = urlsplit(source)
    if parts.scheme.lower() in {"http", "https"} and parts.netloc:
        return source
    return Path(source.removeprefix("upload:")).name or source


def document_admin_may_see(user: AbstractBaseUser) -> bool:
    """Staff who may see documents in the admin also see disabled ones and the full
    processing errors (superusers included); other staff only the knowledge base."""
    return user.has_perm("knowledge.view_document") or user.has_perm("knowledge.change_document")


def document_get_for(user: UserLike, pk: int) -> Document | None:
    """The document, when `user` (a user or a `Reader`) may read it by the one read rule
    (knowledge/access.py: its collection, and withdrawn documents only for those who manage
    documents); else None, exactly as for an id that names no document."""
    return documents_readable(user=user).filter(pk=pk).first()


PROCESSING_FAILED = "This document could not be processed; an admin can see why."
REPROCESSING_FAILED = (
    "The latest version of this document could not be processed; the previous one is still "
    "searchable. An admin can see why."
)


def document_error_for(user: AbstractBaseUser, document: Document) -> str:
    """The processing error as `user` may read it: in full (parser and library messages
    included) for staff who manage documents, else a plain sentence."""
    if not document.error or document_admin_may_see(user):
        return document.error
    return REPROCESSING_FAILED if document.status == Document.Status.READY else PROCESSING_FAILED


def documents_visible_to(user: UserLike) -> QuerySet[Document]:
    """The documents `user` (a user or a `Reader`) may read (knowledge/access.py), by title,
    each with its collection loaded."""
    return documents_readable(user=user).select_related("collection").order_by("title", "id")


@dataclass(frozen=True)
class SheetRow:
    number: int  # the row's number in the sheet
    cells: tuple[str, ...] | None  # a value per column; None: shown whole (a caption)
    text: str  # the row as stored, without the sheet's name
    chunk_id: int
    anchor: str = ""  # the element id a citation link scrolls to
    highlighted: bool = False


@dataclass
class SheetTable:
    name: str
    hidden: bool
    columns: list[str]  # letters
    labels: list[str]
    rows: list[SheetRow] = field(default_factory=list)

    @property
    def width(self) -> int:
        return max(len(self.labels), 1)


def row_cells(text: str, labels: Sequence[str]) -> tuple[str, ...] | None:
    """The value of each column in a row's text ("Code: QX-2207 · Name: Brass valve"), in
    the order of `labels`; None when the text is not such a row (a caption)."""
    values = [""] * len(labels)
    position, found = 0, False
    index = 0
    while index < len(labels):
        label = labels[index]
        head = f"{label}{LABEL_SEPARATOR}"
        if not text.startswith(head, position):
            index += 1
            continue
        start = position + len(head)
        # The value runs to the next " · <later label>: ", the earliest of them.
        end, next_index = len(text), len(labels)
        for later in range(index + 1, len(labels)):
            at = text.find(f"{CELL_SEPARATOR}{labels[later]}{LABEL_SEPARATOR}", start)
            if at != -1 and at < end:
                end, next_index = at, later
        values[index] = text[start:end]
        found = True
        position = end + len(CELL_SEPARATOR)
        index = next_index
    if not found or position < len(text):
        return None
    return tuple(values)


def document_sheet_tables(
    *, document: Document, chunks: Sequence[Chunk], highlighted: int | None, cells: str = ""
) -> list[SheetTable]:
    """The spreadsheet rows of `chunks` (in order) as one table per sheet, the rows of the
    `highlighted` chunk marked (only those within `cells` when given). Each chunk's first row
    (for the highlighted chunk, its first highlighted row) carries the chunk's anchor
    "chunk-<id>". Empty when the chunks are not a spreadsheet's."""
    described = {
        sheet.get("name"): sheet
        for sheet in (document.metadata or {}).get("sheets", [])
        if isinstance(sheet, dict)
    }
    wanted = range_parse(cells) if cells else None
    tables: dict[str, SheetTable] = {}
    for chunk in chunks:
        if not chunk.sheet:
            continue
        table = tables.get(chunk.sheet)
        if table is None:
            info = described.get(chunk.sheet, {})
            table = tables[chunk.sheet] = SheetTable(
                name=chunk.sheet,
                hidden=bool(info.get("hidden")),
                columns=[str(c) for c in info.get("columns", [])],
                labels=[str(label) for label in info.get("labels", [])],
            )
        span = range_parse(chunk.cells)
        first = span.first_row if span else 0
        prefix = f"{chunk.sheet}{ROW_PREFIX_SEPARATOR}"
        anchored = False
        for offset, line in enumerate(chunk.text.split("\n")):
            number = first + offset
            text = line.removeprefix(prefix)
            lit = chunk.pk == highlighted and (
                wanted is None or wanted.first_row <= number <= wanted.last_row
            )
            anchor = ""
            if not anchored and (lit or (chunk.pk != highlighted and offset == 0)):
                anchor, anchored = f"chunk-{chunk.pk}", True
            table.rows.append(
                SheetRow(
                    number=number,
                    cells=row_cells(text, table.labels) if table.labels else None,
                    text=text,
                    chunk_id=chunk.pk,
                    anchor=anchor,
                    highlighted=lit,
                )
            )
        if chunk.pk == highlighted and not anchored and table.rows:  # cells outside the chunk
            index = len(table.rows) - chunk.text.count("\n") - 1
            row = table.rows[index]
            table.rows[index] = SheetRow(
                row.number, row.cells, row.text, row.chunk_id, f"chunk-{chunk.pk}", True
            )
    return list(tables.values())


def sentence_vectors_stored(*, text_hashes: Iterable[str]) -> dict[str, np.ndarray]:
    """text hash → the sentence's vector stored at ingestion under the current model, for the
    hashes that have one."""
    hashes = list(text_hashes)
    if not hashes:
        return {}
    # The vectors in pgvector's binary form (vector_send: a 4-byte header, then big-endian
    # float4s), not as text: docs/decisions/0006-sentence-vectors-read-binary.md.
    table = SentenceVector._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT text_hash, vector_send(vector) FROM {table} "
            "WHERE model = %s AND text_hash = ANY(%s::text[])",
            [embedding.model_version(), text_array(hashes)],
        )
        rows = cursor.fetchall()
    return {
        key: np.frombuffer(data, dtype=">f4", offset=4).astype(np.float32) for key, data in rows
    }
