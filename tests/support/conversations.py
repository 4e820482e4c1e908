"""Stored exchanges: a question and its answer with citations, written directly."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from chat.models import Citation, Conversation, Message
from knowledge.models import Chunk


def exchange_create(
    conversation: Conversation,
    *,
    question: str,
    answer: str,
    cited: Sequence[Chunk] = (),
    status: str = Message.Status.COMPLETE,
    suggestions: Sequence[str] = (),
) -> tuple[Message, Message]:
    """A stored question and its answer citing `cited` as [1], [2], … in order."""
    asked = Message.objects.create(conversation=conversation, role="user", content=question)
    answered = Message.objects.create(
        conversation=conversation,
        role="assistant",
        content=answer,
        status=status,
        reply_to=asked,
        suggestions=list(suggestions),
    )
    for n, chunk in enumerate(cited, start=1):
        Citation.objects.create(
            message=answered,
            chunk=chunk,
            chunk_id_snapshot=chunk.pk,
            n=n,
            similarity=0.8,
            document_id_snapshot=chunk.document_id,
            document_title=chunk.document.title,
            page=chunk.page,
            section=chunk.section,
            url="",
            chunk_index=chunk.index,
            text=chunk.text,
            text_hash=hashlib.sha256(chunk.text.encode()).hexdigest(),
        )
    return asked, answered
