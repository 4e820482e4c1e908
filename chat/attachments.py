"""Personal files attached to conversations (docs/decisions/0081-personal-files.md): an answer
in a conversation searches its owner's files attached to it, and no others."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from django.contrib.auth.base_user import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction

from chat.errors import AnswerError
from chat.models import Attachment, Conversation
from chat.selectors import conversation_get_for
from chat.services import conversation_check_owner
from knowledge.access import Reader, personal_files_filter, reader_searching
from knowledge.models import Document
from knowledge.personal import personal_file_get, personal_file_purge, personal_file_upload

MAX_FILE_IDS = 20


def file_ids_validate(values: Sequence[int] | None) -> list[int] | None:
    """`values` as a sorted list of distinct ids, or AnswerError validation-failed (not a list
    of at most MAX_FILE_IDS positive whole numbers)."""
    if values is None:
        return None
    if (
        isinstance(values, (str, bytes))
        or not isinstance(values, (list, tuple))
        or len(values) > MAX_FILE_IDS
        or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values)
    ):
        raise AnswerError.validation(
            "file_ids", f"file_ids must be a list of at most {MAX_FILE_IDS} file ids."
        )
    return sorted(set(values))


def unknown_file_ids(file_ids: Iterable[int], *, owner: AbstractBaseUser) -> list[int]:
    """Those of `file_ids` that are not `owner`'s personal files still present (someone
    else's, an organisation document, purged, or no such id: all alike)."""
    wanted = set(file_ids)
    known = set(
        Document.objects.filter(
            personal_files_filter(owner=owner), pk__in=wanted, purged_at__isnull=True
        ).values_list("pk", flat=True)
    )
    return sorted(wanted - known)


def attachments_add(*, conversation: Conversation, file_ids: Iterable[int]) -> None:
    """Attach the files `file_ids` (already checked to be the conversation owner's,
    `unknown_file_ids`) to `conversation`; files attached already are left as they are."""
    Attachment.objects.bulk_create(
        [Attachment(conversation=conversation, document_id=pk) for pk in file_ids],
        ignore_conflicts=True,
    )


def conversation_file_ids(conversation_id: uuid.UUID | str) -> list[int]:
    """The ids of the files attached to the conversation."""
    return list(
        Attachment.objects.filter(conversation_id=conversation_id).values_list(
            "document_id", flat=True
        )
    )


def reader_in_conversation(reader: Reader, *, conversation_id: uuid.UUID | str) -> Reader:
    """`reader` searching, besides what they may read, their own files attached to the
    conversation (none when they own none: no query)."""
    if not reader.own_file_ids:
        return reader
    return reader_searching(reader, file_ids=conversation_file_ids(conversation_id))


def conversation_attachments(
    conversation: Conversation, *, user: AbstractBaseUser
) -> list[Document]:
    """The files attached to `conversation` that `user` owns (purged ones included), oldest
    first: what the composer shows them; nothing of anyone else's."""
    return list(
        Document.objects.filter(attachments__conversation=conversation, owner_id=user.pk).order_by(
            "attachments__created_at"
        )
    )


def personal_file_add(
    *, owner: AbstractBaseUser, upload: UploadedFile, conversation_id: uuid.UUID | None = None
) -> Document:
    """Store `upload` as `owner`'s personal file (knowledge/personal.py) and, with
    `conversation_id`, attach it to that conversation, which `owner` must own.

    Raises `AnswerError`: not-found / forbidden for a conversation that is not theirs
    (nothing stored), and `PersonalFileError` for a file refused (type, size, quota)."""
    conversation = None
    if conversation_id is not None:
        conversation = conversation_get_for(owner, conversation_id)
        conversation_check_owner(conversation, owner)
    with transaction.atomic():
        document = personal_file_upload(owner=owner, upload=upload)
        if conversation is not None:
            attachments_add(conversation=conversation, file_ids=[document.pk])
    return document


def personal_file_remove(*, owner: AbstractBaseUser, file_id: int) -> None:
    """Remove `owner`'s file `file_id` now (its text, chunks, vectors and bytes; answers that
    cited it keep their text for `owner`). AnswerError not-found when it is not theirs, or
    was removed or purged already."""
    document = personal_file_get(owner=owner, file_id=file_id)
    if document is None or document.purged_at is not None:
        raise AnswerError.not_found("There is no file with this id.")
    personal_file_purge(document)
