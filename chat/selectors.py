"""Reads of the chat, visibility-aware: shared conversations are readable by all staff, private
ones by their owner only — in lists, pages, the API, the WebSocket and search alike."""

from __future__ import annotations

import uuid

from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import Count, Prefetch, Q, QuerySet

from chat.answering.errors import AnswerError
from chat.models import Citation, Conversation, Message
from knowledge.models import Document


def conversations_visible_to(user: AbstractBaseUser) -> QuerySet[Conversation]:
    """Every conversation `user` may read, newest first."""
    return (
        Conversation.objects.filter(Q(is_private=False) | Q(owner_id=user.pk))
        .select_related("owner")
        .order_by("-updated_at", "-created_at")
    )


def conversation_groups_for(
    user: AbstractBaseUser, *, search: str = "", limit: int | None = None
) -> tuple[list[Conversation], list[Conversation]]:
    """(shared, private) conversations for the sidebar/history, each newest first; `search`
    narrows to titles containing it."""
    visible = conversations_visible_to(user)
    if search:
        visible = visible.filter(title__icontains=search)
    shared = visible.filter(is_private=False)
    private = visible.filter(is_private=True, owner_id=user.pk)
    if limit is not None:
        shared, private = shared[:limit], private[:limit]
    return list(shared), list(private)


def conversation_get_for(user: AbstractBaseUser, conversation_id: uuid.UUID) -> Conversation:
    """The conversation, when `user` may read it.

    Raises AnswerError: not-found (404) when it does not exist, forbidden (403) when it is
    someone else's private conversation.
    """
    conversation = Conversation.objects.select_related("owner").filter(pk=conversation_id).first()
    if conversation is None:
        raise AnswerError.not_found("There is no conversation with this id.")
    if conversation.is_private and conversation.owner_id != user.pk:
        raise AnswerError.forbidden("This conversation is private.")
    return conversation


def conversation_messages(conversation: Conversation) -> list[Message]:
    """The conversation's messages in order, citations (with their chunk and document, to
    tell stale ones) prefetched: a constant number of queries whatever the length."""
    citations = Citation.objects.select_related("chunk__document").order_by("n")
    return list(
        conversation.messages.order_by("created_at", "id").prefetch_related(
            Prefetch("citations", queryset=citations)
        )
    )


def message_get_for(user: AbstractBaseUser, message_id: uuid.UUID) -> Message:
    """A message of a conversation `user` may read (404 / 403 like its conversation)."""
    message = Message.objects.select_related("conversation").filter(pk=message_id).first()
    if message is None:
        raise AnswerError.not_found("There is no message with this id.")
    conversation = message.conversation
    if conversation.is_private and conversation.owner_id != user.pk:
        raise AnswerError.forbidden("This message belongs to a private conversation.")
    return message


def message_answer_with_citations(answer_id: uuid.UUID) -> Message | None:
    citations = Citation.objects.select_related("chunk__document").order_by("n")
    return (
        Message.objects.select_related("conversation")
        .prefetch_related(Prefetch("citations", queryset=citations))
        .filter(pk=answer_id)
        .first()
    )


def documents_list() -> QuerySet[Document]:
    """Every document with its chunk count, by title."""
    return Document.objects.annotate(chunk_count=Count("chunks")).order_by("title", "id")


def unknown_document_ids(document_ids: list[int]) -> list[int]:
    known = set(Document.objects.filter(pk__in=document_ids).values_list("pk", flat=True))
    return sorted(set(document_ids) - known)
