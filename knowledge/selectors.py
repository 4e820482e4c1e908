"""Reads of the knowledge app that more than one adapter needs (admin, API, pages)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Q, QuerySet
from django.utils import timezone

from knowledge.models import Document

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


def document_original_path(document: Document) -> Path | None:
    """Where the original bytes are: the uploaded file, else the ingested path, when it
    still exists."""
    if document.file:
        try:
            path = Path(document.file.path)
        except (NotImplementedError, ValueError):
            return None
        return path if path.is_file() else None
    if document.source:
        path = Path(document.source)
        if path.is_absolute() and path.is_file():
            return path
    return None


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


def document_get_for(user: AbstractBaseUser, pk: int) -> Document | None:
    """The document, when `user` may open it: an enabled one for all staff, a disabled one
    only for those who manage documents (`document_admin_may_see`); else None (not found)."""
    document = Document.objects.filter(pk=pk).first()
    if document is None or (not document.enabled and not document_admin_may_see(user)):
        return None
    return document


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


def documents_visible_to(user: AbstractBaseUser) -> QuerySet[Document]:
    """The documents `user` may see outside the admin, by title: all of them for staff who
    manage documents, the enabled ones for everyone else."""
    documents = Document.objects.order_by("title", "id")
    return documents if document_admin_may_see(user) else documents.filter(enabled=True)
