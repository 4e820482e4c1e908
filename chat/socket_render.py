"""What the chat socket renders from the database for a running exchange: the sources below the
streamed answer, the sidebar (and the header of a conversation its question created) once the
question is stored, and the answer rendered whole at the end, as its reader may read it."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser

from chat import fragments
from chat.answering.stage_cpu import cpu_stage
from chat.documents import documents_file_state
from chat.models import Message
from chat.presenters import (
    MessageView,
    message_views,
    searched_in,
    sources_from_event,
    streamed_answer_view,
)
from chat.selectors import answer_id_of, conversation_get, conversation_item_get
from chat.socket_request import Exchange
from chat.transcript import MessageRow, answer_row_read


@cpu_stage("render")
def sources_html(
    answer_id: str,
    citations: list[dict[str, Any]],
    evidence: str,
    searched_document: dict[str, Any] | None,
    searched_documents: list[dict[str, Any]],
) -> tuple[str, dict[int, bool]]:
    """The sources below the streamed answer `answer_id` and, for weak evidence, its notice
    above; and the cited documents' state they were rendered with (`documents_file_state`),
    for the answer's final render."""
    documents = documents_file_state(c.get("document_id") for c in citations)
    view = MessageView(
        id=answer_id,
        role=Message.Role.ASSISTANT,
        sources=sources_from_event(citations, documents=documents),
        searched_document=searched_in(
            str((searched_document or {}).get("title") or ""), searched_documents
        ),
        evidence=evidence,
    )
    return fragments.sources_html(view) + fragments.evidence_html(view), documents


@cpu_stage("render")
def conversation_fragments(user: AbstractBaseUser, conversation_id: str, *, new: bool) -> str:
    """The sidebar with the conversation `conversation_id` active and, when `new` (its question
    created it), its header first; "" when a new conversation does not exist (refused)."""
    header = ""
    if new:  # the question created it (if it exists: not refused)
        conversation = conversation_get(conversation_id)
        if conversation is None:
            return ""
        header = fragments.conversation_header_html(conversation, user=user)
    return header + fragments.conversation_list_html(user, active_id=conversation_id)


@cpu_stage("render")
def conversation_moved_html(user: AbstractBaseUser, conversation_id: str) -> str:
    """The conversation `conversation_id`'s sidebar item moved to the top of its group with
    its new date (`fragments.sidebar_item_moved_html`); "" when it does not exist."""
    conversation = conversation_item_get(conversation_id)
    if conversation is None:
        return ""
    return fragments.sidebar_item_moved_html(conversation, user=user)


@cpu_stage("render")
def final_html(exchange: Exchange, *, user: AbstractBaseUser, conversation_id: str) -> str:
    """The exchange's answer, looked up in the socket's conversation `conversation_id` only
    (after a Stop the question id may be the client's, naming any conversation's), as `user`
    may read it (`message_views` withholds). A complete answer whose every word and source
    this socket has just sent `user` (`_streamed_whole`) is shown as it was sent
    (`streamed_answer_view`: not withheld again, its sources' documents as `sources_html`
    read them)."""
    in_here = conversation_id
    answer_id = exchange.final_id or answer_id_of(exchange.question_id, conversation_id=in_here)
    read = answer_id and answer_row_read(answer_id, conversation_id=in_here, rater=user)
    if not read:
        return ""
    answer, rating = read
    if _streamed_whole(exchange, answer):
        return _streamed_html(exchange, answer, rating=rating)
    known = {answer.reply_to_id: exchange.question} if exchange.question else None
    view = message_views(
        [answer],
        user=user,
        can_post=True,
        questions=known,
        reader=exchange.reader,
        ratings={answer.pk: rating} if rating is not None else {},
    )[0]
    return _placed_html(exchange, view)


@cpu_stage("render")
def finished_html(exchange: Exchange) -> str | None:
    """The final render of an answer this socket has just streamed whole (`_streamed_whole`)
    from its row as the answering stored it (`exchange.finished`, the `answer_end` event's),
    reading nothing; None when there is no such row or the answer was not streamed whole:
    then `final_html` reads it. A row this process has just written cannot have been rated
    by anyone yet: it is a new answer."""
    answer = exchange.finished
    if answer is None or not _streamed_whole(exchange, answer):
        return None
    return _streamed_html(exchange, answer, rating=None)


def _streamed_html(exchange: Exchange, answer: MessageRow, *, rating: int | None) -> str:
    view = streamed_answer_view(
        answer, rating=rating, question=exchange.question, documents=exchange.documents
    )
    return _placed_html(exchange, view)


def _placed_html(exchange: Exchange, view: MessageView) -> str:
    if exchange.answer_id == str(view.id):
        return fragments.message_html(view, oob="true")
    if exchange.replace_target:
        return fragments.message_html(view, oob=f"outerHTML:{exchange.replace_target}")
    return fragments.append_to_messages(fragments.message_html(view))


def _streamed_whole(exchange: Exchange, answer: MessageRow) -> bool:
    """Whether the events this socket sent for `exchange` held all of `answer` as stored: it is
    complete, and the text and the sources sent (up to answer_end) are its content and its
    citations. Not so for an answer withheld from its reader when replayed (they were sent its
    notice), nor for one stopped or failed."""
    return (
        exchange.ended
        and exchange.documents is not None
        and bool(exchange.question)
        and exchange.answer_id == str(answer.pk)
        and answer.status == Message.Status.COMPLETE
        and exchange.streamed == answer.content
        and exchange.sent_citations == tuple((c.n, c.chunk_id_snapshot) for c in answer.citations)
    )
