"""Personal files written directly (a ready document owned by a user, in the hidden personal
collection), optionally attached to a conversation."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from django.utils import timezone

from chat.models import Attachment, Conversation
from knowledge.models import Collection, Document, collection_personal_id
from tests.support.knowledge_base import document_create


def personal_file_create(
    owner,
    *,
    title: str,
    texts: Sequence[str],
    conversation: Conversation | None = None,
    pages: Sequence[int | None] | None = None,
) -> Document:
    """A ready personal file of `owner` whose chunks are `texts` (embedded by the model),
    expiring in a day, attached to `conversation` when given."""
    document = document_create(
        title=title,
        texts=texts,
        pages=pages,
        collection=Collection.objects.get(pk=collection_personal_id()),
    )
    Document.objects.filter(pk=document.pk).update(
        owner=owner,
        uploaded_by=owner,
        size=sum(len(text) for text in texts),
        expires_at=timezone.now() + timedelta(days=1),
    )
    document.refresh_from_db()
    if conversation is not None:
        Attachment.objects.create(conversation=conversation, document=document)
    return document
