"""The same message id again (a retry, a second tab, concurrently): the stored answer, once it
is no longer streaming, replayed as the events its first request streamed."""

from __future__ import annotations

import asyncio
import time

from channels.db import database_sync_to_async
from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser

from chat import selectors, services
from chat.answering.events import INTERNAL_ERROR_MESSAGE, Event, refusal_data, sources_data
from chat.answering.named_documents import searched_document_of, searched_documents_of
from chat.answering.trace import ExchangeTrace, exchange_log
from chat.citations import citation_as_dict
from chat.errors import AnswerError
from chat.models import Message
from chat.withheld import Withheld, messages_withheld
from knowledge.access import UserLike

POLL_SECONDS = 0.1


async def stored_answer_wait(existing: services.ExchangeExisting) -> Message:
    """The stored answer, once it is no longer streaming (409 if it stays so too long)."""
    answer = existing.answer
    deadline = time.monotonic() + settings.CHAT_ANSWER_WAIT_SECONDS
    while answer.status == Message.Status.STREAMING:
        answer = await database_sync_to_async(services.answer_release_if_stale)(answer)
        if answer.status != Message.Status.STREAMING:
            break
        if time.monotonic() >= deadline:
            raise AnswerError.conflict(
                "This message is still being answered. Try again in a moment.",
                details={"message_id": str(existing.question.pk)},
            )
        await asyncio.sleep(POLL_SECONDS)
        refreshed = await database_sync_to_async(services.answer_refresh)(answer.pk)
        if refreshed is None:
            raise AnswerError.conflict("This message's answer was replaced. Send it again.")
        answer = refreshed
    stored = await database_sync_to_async(selectors.message_answer_with_citations)(answer.pk)
    if stored is None:
        raise AnswerError.conflict("This message's answer was replaced. Send it again.")
    return stored


def stored_answer_events(answer: Message, *, user: UserLike) -> list[Event]:
    """The events of a stored assistant message, as its first request streamed them (the
    content as a single delta), for `user` (the asker, as they may read now): an answer
    withheld from them (`messages_withheld`) is replayed as its notice, with no
    citations, search query or warning. Expects conversation and citations (with
    chunk__document) to be loaded, e.g. by `selectors.message_answer_with_citations`."""
    conversation = answer.conversation
    withheld = messages_withheld(user=user, message_ids=[answer.pk]).get(answer.pk)
    if withheld is not None:
        return _withheld_events(answer, withheld)
    ids = {
        "conversation_id": str(conversation.pk),
        "message_id": str(answer.pk),
        "reply_to": str(answer.reply_to_id),
    }
    events: list[Event] = []
    if answer.warning:
        events.append(Event("warning", {"message": answer.warning}))
    if answer.status == Message.Status.REFUSED:
        events.append(
            Event(
                "refusal",
                refusal_data(ids, answer.content, answer.suggestions, answer.search_query),
            )
        )
        return events
    if answer.status == Message.Status.ERROR:
        events.append(
            Event(
                "error",
                {"code": answer.error_code or "internal", "message": INTERNAL_ERROR_MESSAGE},
            )
        )
        return events
    events.append(
        Event(
            "answer_start",
            {
                **ids,
                "title": conversation.title,
                "is_private": conversation.is_private,
                "search_query": answer.search_query,
            },
        )
    )
    if answer.content:
        events.append(Event("answer_delta", {"text": answer.content}))
    citations = [citation_as_dict(c) for c in answer.citations.all()]
    events.append(
        Event(
            "sources",
            sources_data(
                ids["message_id"],
                citations,
                str(answer.evidence),
                searched_document_of(answer.searched_document_id, answer.searched_document_title),
                searched_documents_of(
                    answer.searched_document_id,
                    answer.searched_document_title,
                    answer.searched_documents,
                ),
            ),
        )
    )
    events.append(
        Event("answer_end", {"message_id": ids["message_id"], "status": str(answer.status)})
    )
    return events


def _withheld_events(answer: Message, withheld: Withheld) -> list[Event]:
    ids = {
        "conversation_id": str(answer.conversation_id),
        "message_id": str(answer.pk),
        "reply_to": str(answer.reply_to_id),
    }
    start = {
        **ids,
        "title": answer.conversation.title,
        "is_private": answer.conversation.is_private,
        "search_query": "",
        "withheld": str(withheld),
    }
    return [
        Event("answer_start", start),
        Event("answer_delta", {"text": withheld.notice}),
        Event("sources", sources_data(ids["message_id"], [], "")),
        Event(
            "answer_end",
            {
                "message_id": ids["message_id"],
                "status": str(answer.status),
                "withheld": str(withheld),
            },
        ),
    ]


def replay_log(exchange: ExchangeTrace, answer: Message, *, user: AbstractBaseUser) -> None:
    """The exchange's log line for a replayed `answer` (its stored figures, `replayed`)."""
    exchange_log(
        exchange,
        conversation=str(answer.conversation_id),
        message=str(answer.pk),
        user=user.pk,
        top_k=answer.top_k,
        status=answer.status,
        citations=len(answer.citations.all()),
        replayed=True,
        best_similarity=answer.best_similarity,
    )
