"""Reads of the chat's conversations and messages, visibility-aware: shared conversations are
readable by all staff, private ones by their owner only — in lists, pages, the API, the WebSocket
and search alike. Neighbours: a conversation's rows as a reader may read them in
chat/transcript.py, withheld answers in chat/withheld.py, the earlier turns an answer remembers in
chat/turns.py, the documents as the chat lists them in chat/documents.py."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from enum import StrEnum

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from django.db.models import (
    Prefetch,
    Q,
    QuerySet,
)

from chat.errors import AnswerError
from chat.models import Citation, Conversation, Feedback, Message
from chat.withheld import messages_withheld, messages_withheld_filter

CITATION_FIELDS = tuple(field.name for field in Citation._meta.concrete_fields)


class ConversationAccess(StrEnum):
    """What a user may do with a conversation: the one privacy rule of the chat
    (docs/product.md §7)."""

    NONE = "none"  # someone else's private conversation: not even its existence
    READ = "read"  # someone else's shared conversation
    OWNER = "owner"  # read, post, rename, delete


def conversation_access(user: AbstractBaseUser, conversation: Conversation) -> ConversationAccess:
    """Shared conversations are readable by all staff, private ones by their owner only, and
    only the owner posts to, renames or deletes a conversation. Pages, the API, the WebSocket,
    search and the services all ask here (`conversations_visible_filter` is the same rule for
    queries)."""
    if conversation.owner_id == user.pk:
        return ConversationAccess.OWNER
    return ConversationAccess.NONE if conversation.is_private else ConversationAccess.READ


def conversations_visible_filter(user: AbstractBaseUser, *, prefix: str = "") -> Q:
    """`conversation_access` as a filter: the conversations `user` may read (`prefix` is the
    path to the conversation from the filtered model, e.g. "conversation__")."""
    return Q(**{f"{prefix}is_private": False}) | Q(**{f"{prefix}owner_id": user.pk})


def conversations_admin_filter(user: AbstractBaseUser, *, prefix: str = "") -> Q:
    """What the admin shows of conversations and their messages (conversations, messages,
    feedback, unanswered questions). Policy: superusers see every conversation; other staff
    with admin access see what they see in the chat (shared ones and their own private ones),
    so the admin is no way around a conversation's privacy."""
    if user.is_active and user.is_superuser:
        return Q()
    return conversations_visible_filter(user, prefix=prefix)


def messages_admin_filter(user: AbstractBaseUser, *, prefix: str = "") -> Q:
    """What the admin shows of messages (through `prefix`, e.g. "message__" for feedback):
    those of the conversations `conversations_admin_filter` shows, less the answers withheld
    from `user` (`messages_withheld_filter`), so the admin is no way around a collection's
    readers either. For a superuser, every message but those drawing on someone else's
    personal file."""
    visible = conversations_admin_filter(user, prefix=f"{prefix}conversation__")
    return visible & ~messages_withheld_filter(user=user, prefix=prefix)


def conversations_visible_to(user: AbstractBaseUser) -> QuerySet[Conversation]:
    """Every conversation `user` may read, newest first."""
    return (
        Conversation.objects.filter(conversations_visible_filter(user))
        .select_related("owner")
        .order_by("-updated_at", "-created_at")
    )


def conversation_groups_for(
    user: AbstractBaseUser, *, search: str = "", limit: int | None = None
) -> tuple[list[Conversation], list[Conversation]]:
    """(shared, private) conversations for the sidebar/history, each newest first; `search`
    narrows to titles containing it; `limit`: at most that many of each. One query either way
    (docs/decisions/0047-the-sidebar-in-one-query.md). The sidebar's (a limit, no search) is
    written out: the newest shared ones read from the `conv_shared_updated` index, the
    reader's newest private ones from `conv_private_owner_updated`, so its work does not grow
    with the number of conversations, anyone's (docs/decisions/0152-statements-written-out.md,
    docs/decisions/0177-the-sidebar-reads-what-it-shows.md)."""
    if limit is not None and not search:
        rows = list(Conversation.objects.raw(_SIDEBAR_SQL, [limit, user.pk, limit]))
    else:
        visible = conversations_visible_to(user)
        if search:
            visible = visible.filter(title__icontains=search)
        mine_or_shared = Q(is_private=False) | Q(is_private=True, owner_id=user.pk)
        rows = list(visible.filter(mine_or_shared))
    rows.sort(key=lambda c: (c.updated_at, c.created_at), reverse=True)
    shared = [c for c in rows if not c.is_private]
    private = [c for c in rows if c.is_private]
    if limit is not None:
        shared, private = shared[:limit], private[:limit]
    return shared, private


def _sidebar_sql() -> str:
    columns = ", ".join(field.column for field in Conversation._meta.concrete_fields)
    table = Conversation._meta.db_table
    newest = "ORDER BY updated_at DESC, created_at DESC LIMIT %s"
    return (
        f"(SELECT {columns} FROM {table} WHERE NOT is_private {newest}) UNION ALL "
        f"(SELECT {columns} FROM {table} WHERE is_private AND owner_id = %s {newest})"
    )


# The newest shared conversations, and the newest private ones of the reader (`limit` each).
_SIDEBAR_SQL = _sidebar_sql()


def conversation_access_by_id(
    user: AbstractBaseUser, conversation_id: uuid.UUID | str
) -> ConversationAccess | None:
    """`conversation_access` of the conversation `conversation_id`, None when it does not
    exist (yet: a first question creates it). One query of two columns."""
    conversation = (
        Conversation.objects.filter(pk=conversation_id).only("owner_id", "is_private").first()
    )
    return None if conversation is None else conversation_access(user, conversation)


def conversation_item_get(conversation_id: uuid.UUID | str) -> Conversation | None:
    """The conversation's fields its sidebar item shows (id, owner, privacy, title, last
    update), None when it does not exist. The caller has checked the reader's access. Written
    out: it runs for every question a socket answers after its first
    (docs/decisions/0152-statements-written-out.md)."""
    with connection.cursor() as cursor:
        cursor.execute(_ITEM_SQL, [str(conversation_id)])
        row = cursor.fetchone()
    if row is None:
        return None
    return Conversation(**dict(zip(_ITEM_FIELDS, row, strict=True)))


_ITEM_FIELDS = ("id", "owner_id", "is_private", "title", "updated_at")
_ITEM_SQL = (
    f"SELECT {', '.join(_ITEM_FIELDS)} FROM {Conversation._meta.db_table} "  # noqa: S608
    "WHERE id = %s::uuid"
)


def conversation_get(conversation_id: uuid.UUID | str) -> Conversation | None:
    """The conversation with its owner, None when it does not exist. The caller has checked
    the reader's access."""
    return Conversation.objects.select_related("owner").filter(pk=conversation_id).first()


def conversation_get_for(user: AbstractBaseUser, conversation_id: uuid.UUID) -> Conversation:
    """The conversation, when `user` may read it.

    Raises AnswerError: not-found (404) when it does not exist, forbidden (403) when it is
    someone else's private conversation.
    """
    conversation = Conversation.objects.select_related("owner").filter(pk=conversation_id).first()
    if conversation is None:
        raise AnswerError.not_found("There is no conversation with this id.")
    if conversation_access(user, conversation) == ConversationAccess.NONE:
        raise AnswerError.forbidden("This conversation is private.")
    return conversation


def citations_with_source_state() -> QuerySet[Citation]:
    """Citations by number, each with the few columns of its chunk and document that tell
    whether it is stale (`citation_is_stale`): the chunk's text, the document's enabled flag
    and status. Not the chunk's search vector or the document's metadata, which are large and
    unused here."""
    return (
        Citation.objects.select_related("chunk__document")
        .only(
            *CITATION_FIELDS,
            "chunk__text",
            "chunk__document__enabled",
            "chunk__document__status",
            "chunk__document__expires_at",
        )
        .order_by("n")
    )


def conversation_messages(conversation: Conversation) -> list[Message]:
    """The conversation's messages in order, citations (with what tells stale ones)
    prefetched: two queries whatever the length."""
    return list(
        conversation.messages.exclude(role__in=Message.HIDDEN_ROLES)
        .order_by("created_at", "id")
        .prefetch_related(Prefetch("citations", queryset=citations_with_source_state()))
    )


def message_get_for(user: AbstractBaseUser, message_id: uuid.UUID) -> Message:
    """A message of a conversation `user` may read (404 / 403 like its conversation); an
    answer withheld from `user` (`messages_withheld`) is answered like a message that does
    not exist (404)."""
    message = Message.objects.select_related("conversation").filter(pk=message_id).first()
    if message is None or messages_withheld(user=user, message_ids=[message_id]):
        raise AnswerError.not_found("There is no message with this id.")
    if conversation_access(user, message.conversation) == ConversationAccess.NONE:
        raise AnswerError.forbidden("This message belongs to a private conversation.")
    return message


def exchange_stored(
    *, conversation_id: uuid.UUID | str, question_id: uuid.UUID | str
) -> tuple[Message | None, Message | None]:
    """The question `question_id` stored in the conversation (None: never sent there) and its
    answer (None: not stored yet). One query when the question is not stored, else two."""
    # Written out: it runs for every message a socket answers
    # (docs/decisions/0152-statements-written-out.md).
    try:
        question_uuid = uuid.UUID(str(question_id))
    except ValueError:
        return None, None
    found = list(
        Message.objects.raw(
            _STORED_SQL, [str(question_uuid), str(conversation_id), Message.Role.USER]
        )
    )
    if not found:
        return None, None
    answers = list(
        Message.objects.raw(_ANSWER_OF_SQL, [str(question_uuid), Message.Role.ASSISTANT])
    )
    return found[0], answers[0] if answers else None


_MESSAGE_COLUMNS_SQL = ", ".join(field.column for field in Message._meta.concrete_fields)
_STORED_SQL = (
    f"SELECT {_MESSAGE_COLUMNS_SQL} FROM {Message._meta.db_table} "  # noqa: S608
    "WHERE id = %s::uuid AND conversation_id = %s::uuid AND role = %s LIMIT 1"
)
_ANSWER_OF_SQL = (
    f"SELECT {_MESSAGE_COLUMNS_SQL} FROM {Message._meta.db_table} "  # noqa: S608
    "WHERE reply_to_id = %s::uuid AND role = %s ORDER BY created_at, id LIMIT 1"
)


def answer_id_of(
    question_id: uuid.UUID | str, *, conversation_id: uuid.UUID | str
) -> uuid.UUID | None:
    """The id of the question's stored answer in conversation `conversation_id`, None when
    there is none there (a question id of another conversation finds nothing)."""
    return (
        Message.objects.filter(
            reply_to_id=question_id,
            role=Message.Role.ASSISTANT,
            conversation_id=conversation_id,
        )
        .values_list("pk", flat=True)
        .first()
    )


def question_last_asked_by(user: AbstractBaseUser) -> str:
    """The text of the last question `user` asked, in any conversation ("" when none)."""
    return (
        Message.objects.filter(conversation__owner=user, role=Message.Role.USER)
        .order_by("-created_at")
        .values_list("content", flat=True)
        .first()
        or ""
    )


def message_answer_with_citations(
    answer_id: uuid.UUID | str, *, conversation_id: uuid.UUID | str | None = None
) -> Message | None:
    """The answer with its conversation and its citations (what tells stale ones
    prefetched), None when it does not exist (or, with `conversation_id`, is not in that
    conversation)."""
    found = Message.objects.filter(pk=answer_id)
    if conversation_id is not None:
        found = found.filter(conversation_id=conversation_id)
    return (
        found.select_related("conversation")
        .prefetch_related(Prefetch("citations", queryset=citations_with_source_state()))
        .first()
    )


def messages_text(message_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
    """{message id: its text} for the messages of `message_ids` (one query)."""
    return dict(Message.objects.filter(pk__in=set(message_ids)).values_list("pk", "content"))


def ratings_given(
    user: AbstractBaseUser,
    *,
    conversation_id: uuid.UUID | None = None,
    message_ids: Sequence[uuid.UUID] = (),
) -> dict[uuid.UUID, int]:
    """{message id: the rating `user` gave it}, for the messages of the conversation
    `conversation_id` when given, else for `message_ids` (one query)."""
    given = Feedback.objects.filter(user=user)
    if conversation_id is not None:
        given = given.filter(message__conversation_id=conversation_id)
    else:
        given = given.filter(message__in=list(message_ids))
    return dict(given.values_list("message_id", "rating"))
