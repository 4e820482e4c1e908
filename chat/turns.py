"""What an answer remembers of its conversation: the earlier turns (`conversation_turns_before`)
and the memory beyond its history window (`conversation_memory`: the latest summary and the
turns it has not folded in), an answer its asker may not read now left out as if unanswered."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.postgres.expressions import ArraySubquery
from django.db import connection
from django.db.models import (
    OuterRef,
)

from chat.answering.followups import Turn
from chat.models import Citation, Conversation, DocumentGiven, Message
from chat.withheld import Withheld, messages_withheld
from chat.withheld_sql import withheld_exists_sql
from knowledge.access import (
    Reader,
)
from knowledge.sql_prepared import cursor_prepared


def conversation_turns_before(
    question: Message, *, limit: int, asker: Reader | None = None
) -> list[Turn]:
    """The (at most `limit`) questions asked in `question`'s conversation before it, oldest
    first, each with what became of it: its answer's text, status, search query, cited
    documents and the documents whose text reached it (`DocumentGiven`); an answer its asker
    (the conversation's owner) may not read now (`messages_withheld`) as if it had not been
    answered. One query (the questions, their answers joined, the cited and given documents as
    arrays, the owner and, for an `asker` who owns the conversation and reads some collections,
    whether each answer is withheld from them: `chat.withheld_sql.withheld_exists_sql`);
    otherwise two more when an answer drew on a document (the owner's reader, the answers
    withheld from them). `asker`: the `Reader` the request computed for the question's asker,
    used when they own the conversation (no query for the owner's reader)."""
    messages = connection.ops.quote_name(Message._meta.db_table)
    citations = connection.ops.quote_name(Citation._meta.db_table)
    given = connection.ops.quote_name(DocumentGiven._meta.db_table)
    conversations = connection.ops.quote_name(Conversation._meta.db_table)
    owner = f"(SELECT owner_id FROM {conversations} WHERE id = %s)"
    # For an asker of some collections, whether each answer is withheld from them is read in
    # the same statement, when they own the conversation (NULL otherwise: checked after).
    withheld_sql, withheld_params = "NULL", []
    if asker is not None and not asker.is_superuser and not asker.reads_nothing:
        exists, exists_params = withheld_exists_sql(asker, message="a.id")
        withheld_sql = f"CASE WHEN {owner} = %s THEN {exists} END"
        withheld_params = [question.conversation_id, asker.user_id, *exists_params]
    with cursor_prepared() as cursor:  # planned once per connection (0156)
        cursor.execute(
            f"SELECT a.id, q.content, a.status, a.content, a.search_query, "
            f"ARRAY(SELECT c.document_id_snapshot FROM {citations} c WHERE c.message_id = a.id "
            f"AND c.document_id_snapshot IS NOT NULL ORDER BY c.n), "
            f"ARRAY(SELECT g.document_id FROM {given} g WHERE g.message_id = a.id "
            f"ORDER BY g.document_id), "
            f"{owner}, {withheld_sql} "
            f"FROM (SELECT id, content, created_at FROM {messages} WHERE conversation_id = %s "
            f"AND role = %s AND created_at < %s ORDER BY created_at DESC, id DESC LIMIT %s) q "
            f"LEFT JOIN {messages} a ON a.reply_to_id = q.id AND a.role = %s "
            f"ORDER BY q.created_at, q.id",
            [
                question.conversation_id, *withheld_params, question.conversation_id,
                Message.Role.USER, question.created_at, limit, Message.Role.ASSISTANT,
            ],
        )  # fmt: skip
        rows = cursor.fetchall()
    # An answer that drew on nothing (no citation snapshot, no record) is never withheld.
    drew_on_something = [row for row in rows if row[0] is not None and (row[5] or row[6])]
    if rows and rows[0][8] is not None:
        withheld = {row[0] for row in drew_on_something if row[8]}
    else:
        withheld = set(
            _withheld_from_asker(
                rows[0][7] if rows else None,
                [row[0] for row in drew_on_something],
                asker=asker,
            )
        )
    return [
        _turn(content, status or "", answer or "", search_query or "", cited or (), drew or ())
        if answer_id not in withheld
        else _turn(content, "", "", "", (), ())
        for answer_id, content, status, answer, search_query, cited, drew, _, _ in rows
    ]


def _withheld_from_asker(
    owner_id: int | None, answer_ids: list[uuid.UUID], *, asker: Reader | None = None
) -> dict[uuid.UUID, Withheld]:
    """`messages_withheld` of the answers `answer_ids` for the conversation's owner `owner_id`
    (who asked them): none and no query when there are none. `asker`: a `Reader` the same
    request computed, used when it is the owner's (no query for the owner's reader)."""
    if not answer_ids:
        return {}
    if asker is not None and owner_id is not None and asker.user_id == owner_id:
        return messages_withheld(user=asker, message_ids=answer_ids)
    owner = get_user_model()(pk=owner_id)  # reader_for reads the user's flags by its pk
    return messages_withheld(user=owner, message_ids=answer_ids)


def _turn(
    question: str,
    status: str,
    answer: str,
    search_query: str,
    cited: Sequence[int],
    given: Sequence[int],
) -> Turn:
    complete = status == Message.Status.COMPLETE
    return Turn(
        question=question,
        search_query=search_query,
        answer=answer if complete else "",
        answered=complete,
        cited_document_ids=tuple(dict.fromkeys(cited)),
        # What a later answer given this turn (its answer, or only its search query) draws on.
        given_document_ids=tuple(sorted({*given, *cited})),
    )


def _turns_of(questions: list[tuple[uuid.UUID, str]]) -> list[tuple[uuid.UUID, Turn]]:
    """(id, Turn) of each (id, text) question, in the given order, an answer its asker may not
    read now (`_withheld_from_asker`) as if unanswered: three queries, three more when an
    answer drew on a document."""
    if not questions:
        return []
    answers = {
        reply_to: (answer_id, status, content, search_query)
        for answer_id, reply_to, status, content, search_query in Message.objects.filter(
            reply_to_id__in=[pk for pk, _ in questions], role=Message.Role.ASSISTANT
        ).values_list("id", "reply_to_id", "status", "content", "search_query")
    }
    answer_ids = [a[0] for a in answers.values()]
    cited: dict[uuid.UUID, list[int]] = {}
    for message_id, document_id in (
        Citation.objects.filter(message_id__in=answer_ids)
        .exclude(document_id_snapshot=None)
        .order_by("message_id", "n")
        .values_list("message_id", "document_id_snapshot")
    ):
        cited.setdefault(message_id, []).append(document_id)
    given: dict[uuid.UUID, list[int]] = {}
    for message_id, document_id in DocumentGiven.objects.filter(
        message_id__in=answer_ids
    ).values_list("message_id", "document_id"):
        given.setdefault(message_id, []).append(document_id)
    owner_id = Message.objects.filter(pk=questions[0][0]).values_list(
        "conversation__owner_id", flat=True
    )
    drew = {*cited, *given}
    withheld = _withheld_from_asker(owner_id.first(), list(drew)) if drew else {}
    turns = []
    for pk, content in questions:
        answer_id, status, answer, search_query = answers.get(pk, (None, "", "", ""))
        if answer_id in withheld:  # as if unanswered: its asker may not read it now
            answer_id, status, answer, search_query = None, "", "", ""
        turn = _turn(
            content, status, answer, search_query, cited.get(answer_id, ()),
            given.get(answer_id, ()),
        )  # fmt: skip
        turns.append((pk, turn))
    return turns


@dataclass(frozen=True)
class ConversationMemory:
    """What a generative answer remembers beyond its history window: the latest
    system-summary (its text, "" when none) and the questions older than the window that no
    summary has folded in yet ((id, Turn), oldest first); `summary_given`: the documents the
    summary drew on (its `DocumentGiven` record)."""

    summary: str
    unfolded: list[tuple[uuid.UUID, Turn]]
    summary_given: tuple[int, ...] = ()


def conversation_memory(
    question_id: uuid.UUID, *, window: int, limit: int = 40
) -> ConversationMemory:
    """The memory of the question's conversation before it, outside its last `window` turns
    (at most `limit` unfolded turns, the newest). A summary the conversation's owner may not
    read now (`messages_withheld`) is left out, as if never written."""
    question = Message.objects.filter(pk=question_id).values("conversation_id", "created_at")
    question = question.first()
    if question is None:
        return ConversationMemory("", [])
    earlier = Message.objects.filter(
        conversation_id=question["conversation_id"], created_at__lt=question["created_at"]
    )
    summary = (
        Message.objects.filter(
            conversation_id=question["conversation_id"],
            role=Message.Role.SYSTEM_SUMMARY,
            reply_to__created_at__lt=question["created_at"],
        )
        .order_by("-reply_to__created_at", "-created_at")
        .annotate(
            given=ArraySubquery(
                DocumentGiven.objects.filter(message_id=OuterRef("pk")).values("document_id")
            )
        )
        .values_list("content", "reply_to__created_at", "given", "pk", "conversation__owner_id")
        .first()
    )
    if summary is not None and _withheld_from_asker(summary[4], [summary[3]] if summary[2] else []):
        summary = None  # its asker may not read it now: the turns are folded again without it
    older = earlier.filter(role=Message.Role.USER)
    if summary is not None:
        older = older.filter(created_at__gt=summary[1])
    rows = list(
        older.order_by("-created_at", "-id").values_list("id", "content")[window : window + limit]
    )
    return ConversationMemory(
        summary[0] if summary else "",
        _turns_of(list(reversed(rows))),
        summary_given=tuple(summary[2]) if summary else (),
    )
