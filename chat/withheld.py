"""Which answers a reader may not read, and why: an answer whose text drew on a document the
reader may not read (knowledge/access.py) is withheld from them
(docs/decisions/0080-withheld-answers.md); for messages in hand (`messages_withheld`, through
chat/withheld_sql.py) and as a query filter (`messages_withheld_filter`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from enum import StrEnum

from django.db.models import (
    Exists,
    F,
    OuterRef,
    Q,
    QuerySet,
)
from django.db.models.functions import Coalesce

from chat.models import Citation, DocumentGiven
from chat.withheld_sql import withheld_rows
from knowledge.access import (
    Reader,
    UserLike,
    documents_readable_filter,
    personal_files_filter,
    reader_for,
)
from knowledge.models import Document


class Withheld(StrEnum):
    """Why an answer is withheld from a reader (docs/decisions/0080-withheld-answers.md)."""

    ACCESS = "access"  # it cites a document of a collection the reader may not read
    WITHDRAWN = "withdrawn"  # it cites a disabled, expired or deleted document

    @property
    def notice(self) -> str:
        """What the reader sees in the answer's place."""
        if self == Withheld.ACCESS:
            return "This answer draws on documents you don't have access to."
        return "This answer draws on a document that has been withdrawn."


def _cited_document_id() -> Coalesce:
    """A citation's document: its snapshot, else (citations stored before the snapshot) its
    chunk's; NULL when neither is known."""
    return Coalesce("document_id_snapshot", "chunk__document_id")


def _drawn_on(**filters) -> list[QuerySet]:
    """The documents the messages selected by `filters` (on the message, through `message`)
    drew on, as two querysets of rows annotated `cited_document`: the record of what reached
    each (`DocumentGiven`) and, for safety, what each cites (`Citation`)
    (docs/decisions/0130-an-answer-records-what-it-was-given.md)."""
    given = DocumentGiven.objects.filter(**filters).annotate(cited_document=F("document_id"))
    cited = Citation.objects.filter(**filters).annotate(cited_document=_cited_document_id())
    return [given, cited]


def _document_readable(reader: Reader) -> Exists:
    """The rule (`documents_readable_filter`) on the document of the citation row annotated
    `cited_document`."""
    return Exists(
        Document.objects.filter(
            documents_readable_filter(user=reader), pk=OuterRef("cited_document")
        )
    )


def _drawing_on_others_files(rows: QuerySet, reader: Reader) -> QuerySet:
    """Those of `rows` (annotated `cited_document`) on someone else's personal file (present
    or purged): what a superuser, who reads every other document, may not read
    (docs/decisions/0081-personal-files.md)."""
    others = Document.objects.filter(personal_files_filter()).exclude(
        pk__in=sorted(reader.own_file_ids)
    )
    return rows.filter(Exists(others.filter(pk=OuterRef("cited_document"))))


def messages_withheld_filter(*, user: UserLike, prefix: str = "") -> Q:
    """The messages (through `prefix`, e.g. "messages__") whose text `user` may not read: a
    document whose text reached them (`DocumentGiven`) or that they cite is one `user` may not
    read (`knowledge.access`), or one that no longer exists (or is unknown: messages stored
    before the record). For a superuser, only those drawing on someone else's personal file;
    every message that drew on any document for someone who reads nothing.
    `messages_withheld` says why, for messages in hand."""
    reader = reader_for(user)
    drawn = _drawn_on(message_id=OuterRef(f"{prefix}pk"))
    if reader.is_superuser:
        if not reader.others_files:
            return Q(pk__in=[])
        drawn = [_drawing_on_others_files(rows, reader) for rows in drawn]
    elif not reader.reads_nothing:
        drawn = [rows.filter(~_document_readable(reader)) for rows in drawn]
    return Q(Exists(drawn[0])) | Q(Exists(drawn[1]))


def messages_withheld(
    *,
    user: UserLike,
    message_ids: Iterable[uuid.UUID] | None = None,
    conversation_id: uuid.UUID | str | None = None,
) -> dict[uuid.UUID, Withheld]:
    """{message id: why it is withheld from `user`} for the messages of `message_ids`, or of
    the conversation `conversation_id`, that `user` may not read (absent: readable). One query
    whatever the number of messages; for a superuser, only the messages drawing on someone
    else's personal file (`ACCESS`), and no query when there is none (`Reader.others_files`).

    A message is withheld when a document whose text reached it (its record,
    `DocumentGiven`: the passages it was given, the earlier turns and summary in its prompt,
    what its search query was built from) or one it cites (`Citation.document_id_snapshot`,
    the chunk may be gone) is one `user` may not read by `knowledge.access`: `ACCESS` when one
    of them is in a collection `user` may not read, else `WITHDRAWN` (disabled, expired or no
    longer processed, for a reader who does not manage documents; deleted or unknown, for
    anyone but a superuser, since its collection is no longer known). Decided from the
    documents as they are now: a revocation or a move is seen on the next call
    (docs/decisions/0130-an-answer-records-what-it-was-given.md).
    """
    reader = reader_for(user)
    message_ids = None if message_ids is None else list(message_ids)
    filters: dict = {}
    if conversation_id is not None:
        filters["message__conversation_id"] = conversation_id
    if message_ids is not None:
        filters["message_id__in"] = message_ids
    if reader.is_superuser:
        if not reader.others_files:
            return {}
        given, cited = (_drawing_on_others_files(rows, reader) for rows in _drawn_on(**filters))
        drawn = given.values_list("message_id", flat=True).union(
            cited.values_list("message_id", flat=True)
        )
        return dict.fromkeys(drawn, Withheld.ACCESS)
    if reader.reads_nothing:
        given, cited = _drawn_on(**filters)
        drawn = given.values_list("message_id", flat=True).union(
            cited.values_list("message_id", flat=True)
        )
        return dict.fromkeys(drawn, Withheld.ACCESS)
    # One hand-written statement (chat/withheld_sql.py): compiling the same query with the ORM
    # cost more CPU than running it (docs/decisions/0151-one-reader-per-question.md).
    rows = withheld_rows(
        reader,
        conversation_id=conversation_id,
        message_ids=message_ids,
    )
    withheld: dict[uuid.UUID, Withheld] = {}
    for message_id, in_collection, exists in rows:
        if exists and not in_collection:
            withheld[message_id] = Withheld.ACCESS
        else:
            withheld.setdefault(message_id, Withheld.WITHDRAWN)
    return withheld
