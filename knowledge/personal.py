"""Personal files: a document a user uploads for themselves, read by them alone, searched only
in the conversations they attach it to, purged when it expires
(docs/decisions/0081-personal-files.md).

A personal file is a `Document` with an `owner`, in the hidden personal collection
(`collection_personal_id`), so the one read rule (knowledge/access.py) decides who reads it.
It is processed by the same parsers and ingestion as the admin's uploads, in the background
worker (`personal_file_process_task`), and purged by `personal_files_purge_expired` (a task
queued to run when it expires, and `manage.py purge_expired`): its chunks, vectors and bytes
go, its row stays (`purged_at`) so that the answers citing it still know whose it was.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.files.uploadedfile import UploadedFile
from django.db import connection, transaction
from django.db.models import Count, QuerySet, Sum
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django_tasks import task

from knowledge.access import document_is_personal, personal_files_filter
from knowledge.models import (
    Chunk,
    Document,
    Embedding,
    PersonalFileSettings,
    collection_personal_id,
)
from knowledge.parsers import UnsupportedFileType, file_type_check
from knowledge.signals import knowledge_changed_send

logger = logging.getLogger(__name__)

# Lower than the default (0): the worker reads the admin's uploads first.
PROCESS_PRIORITY = -10
# How an answer names a personal file it cites: "your file · offer.pdf".
PERSONAL_LABEL = "your file · "


def personal_file_label(title: str) -> str:
    """The name a citation gives a personal file titled `title`."""
    return f"{PERSONAL_LABEL}{title}"


def is_personal_file_label(label: str) -> bool:
    return label.startswith(PERSONAL_LABEL)


class PersonalFileError(Exception):
    """A personal file refused: `code` (`too-large`, `empty`, `unsupported-type`,
    `quota-exceeded`) and a message for the user."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass(frozen=True)
class Usage:
    """What a user's personal files hold now (purged ones excluded)."""

    files: int
    bytes: int


def personal_files_of(owner: AbstractBaseUser) -> QuerySet[Document]:
    """`owner`'s personal files that are not purged, newest first."""
    return Document.objects.filter(
        personal_files_filter(owner=owner), purged_at__isnull=True
    ).order_by("-created_at")


def personal_file_get(*, owner: AbstractBaseUser, file_id: int) -> Document | None:
    """`owner`'s personal file `file_id` (purged or not); None for anyone else's, an
    organisation document or one that does not exist (all alike to the caller)."""
    return Document.objects.filter(personal_files_filter(owner=owner), pk=file_id).first()


def personal_file_state(document: Document) -> str:
    """What the owner sees of a file's progress: `pending`, `processing`, `ready`, `failed`,
    `expired` (its time is up, or it was removed: its text is gone)."""
    if document.purged_at is not None or document.is_expired:
        return "expired"
    return document.status


def personal_usage(owner: AbstractBaseUser) -> Usage:
    totals = personal_files_of(owner).aggregate(files=Count("pk"), bytes=Sum("size"))
    return Usage(files=totals["files"], bytes=totals["bytes"] or 0)


def personal_file_ttl() -> timedelta:
    """How long a file uploaded now lives: the admin's *Personal file settings* when set,
    else PERSONAL_FILE_TTL (seconds, from the environment). Read at each upload, so a change
    applies to the next one."""
    hours = PersonalFileSettings.objects.filter(pk=1).values_list("ttl_hours", flat=True).first()
    if hours:
        return timedelta(hours=hours)
    return timedelta(seconds=settings.PERSONAL_FILE_TTL)


def personal_file_check(*, owner: AbstractBaseUser, name: str, size: int) -> str:
    """The media type of a file `owner` may upload as `name` of `size` bytes, or
    `PersonalFileError`: an unsupported type, an empty or too large file, or over the user's
    quota (files or bytes)."""
    try:
        media_type = file_type_check(name)
    except UnsupportedFileType as exc:
        raise PersonalFileError("unsupported-type", str(exc)) from exc
    if size == 0:
        raise PersonalFileError("empty", f"The file {name} is empty.")
    limit = settings.PERSONAL_FILE_MAX_BYTES
    if size > limit:
        raise PersonalFileError(
            "too-large",
            f"The file {name} is too large ({filesizeformat(size)}); the limit is "
            f"{filesizeformat(limit)}.",
        )
    usage = personal_usage(owner)
    if usage.files + 1 > settings.PERSONAL_FILES_MAX_PER_USER:
        raise PersonalFileError(
            "quota-exceeded",
            f"You already have {usage.files} files (the limit is "
            f"{settings.PERSONAL_FILES_MAX_PER_USER}); remove one before adding another.",
        )
    quota = settings.PERSONAL_FILES_MAX_BYTES_PER_USER
    if usage.bytes + size > quota:
        raise PersonalFileError(
            "quota-exceeded",
            f"Your files would take {filesizeformat(usage.bytes + size)}, over your limit of "
            f"{filesizeformat(quota)}; remove a file before adding this one.",
        )
    return media_type


# The first key of the advisory lock that holds a user's quota while one upload is checked
# and stored (the second is the user's id).
QUOTA_LOCK = 8_104_081


def _quota_lock(owner: AbstractBaseUser) -> None:
    """Hold `owner`'s quota until the transaction ends: PostgreSQL's transaction-level
    advisory lock, so that parallel uploads of one user are checked and stored one after the
    other (and those of different users, or a login writing the user's row, wait for nothing)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [QUOTA_LOCK, owner.pk])


def personal_file_upload(
    *, owner: AbstractBaseUser, upload: UploadedFile, now: datetime | None = None
) -> Document:
    """Store `upload` as a personal file of `owner` (pending), expiring `personal_file_ttl()`
    (the value in force now) after `now`, and queue its reading by the worker (after the
    admin's uploads) and its purge at expiry, once the transaction commits.
    Raises `PersonalFileError` (nothing stored). The quota is checked and the file stored
    under the user's quota lock (`_quota_lock`), so parallel uploads cannot pass it together
    (docs/decisions/0148-uploads-and-sockets-with-limits.md)."""
    with transaction.atomic():
        _quota_lock(owner)
        return _upload_stored(owner=owner, upload=upload, now=now)


def _upload_stored(
    *, owner: AbstractBaseUser, upload: UploadedFile, now: datetime | None
) -> Document:
    name = Path(upload.name or "file").name[:200] or "file"
    media_type = personal_file_check(owner=owner, name=name, size=upload.size)
    key = uuid.uuid4().hex
    now = now or timezone.now()
    document = Document(
        title=name,
        source=f"personal:{owner.pk}/{key}/{name}",
        media_type=media_type,
        status=Document.Status.PENDING,
        collection_id=collection_personal_id(),
        owner=owner,
        uploaded_by=owner,
        size=upload.size,
        expires_at=now + personal_file_ttl(),
        metadata={"original_name": name, "size": upload.size},
    )
    document.file.save(f"personal/{key}/{name}", upload, save=False)
    document.save()
    transaction.on_commit(lambda: _enqueue(document))
    return document


def _enqueue(document: Document) -> None:
    try:
        personal_file_process_task.using(priority=PROCESS_PRIORITY).enqueue(document.pk)
        if personal_files_purge_task.get_backend().supports_defer:
            personal_files_purge_task.using(run_after=document.expires_at).enqueue()
        # else (a backend that runs tasks at once) `manage.py purge_expired` purges
    except Exception as exc:  # the upload is saved: its failure is shown on the file
        logger.exception("Could not queue personal file %s", document.pk)
        Document.objects.filter(pk=document.pk).update(
            status=Document.Status.FAILED, error=f"Could not queue the file for reading ({exc})."
        )


def personal_file_purge(document: Document, *, now: datetime | None = None) -> None:
    """Remove a personal file's text: its chunks and vectors, its stored bytes (once the
    transaction commits); its row stays, marked `purged_at`, disabled and without expiry
    reading. The caller holds no lock; a second call does nothing."""
    storage = Document._meta.get_field("file").storage
    with transaction.atomic():
        locked = Document.objects.select_for_update().filter(pk=document.pk).first()
        if locked is None or not document_is_personal(locked) or locked.purged_at is not None:
            return
        name = locked.file.name if locked.file else ""
        Embedding.objects.filter(document_id=locked.pk).delete()
        Chunk.objects.filter(document_id=locked.pk).delete()
        Document.objects.filter(pk=locked.pk).update(
            purged_at=now or timezone.now(), enabled=False, file="", updated_at=timezone.now()
        )
        knowledge_changed_send()
        if name:
            transaction.on_commit(lambda: storage.delete(name) if storage.exists(name) else None)


def personal_files_purge_expired(*, now: datetime | None = None) -> int:
    """Purge (`personal_file_purge`) every personal file expired at `now`; returns how many."""
    now = now or timezone.now()
    expired = Document.objects.filter(
        personal_files_filter(), purged_at__isnull=True, expires_at__lte=now
    ).order_by("pk")
    count = 0
    for document in expired:
        personal_file_purge(document, now=now)
        count += 1
    return count


@task(priority=PROCESS_PRIORITY)
def personal_file_process_task(document_id: int) -> str:
    """Read (parse, chunk, embed) a personal file in the background, as the admin's uploads
    are; a file removed or purged meanwhile is skipped. Returns the outcome action."""
    from knowledge.services.ingest import document_process

    document = Document.objects.filter(pk=document_id, purged_at__isnull=True).first()
    if document is None:
        return "missing"
    return document_process(document=document).action


@task()
def personal_files_purge_task() -> int:
    """Purge the personal files expired by now (queued to run at each file's expiry)."""
    return personal_files_purge_expired()
