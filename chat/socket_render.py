"""What the chat socket renders from the database for a running exchange: the sources below the
streamed answer, the sidebar (and the header of a conversation its question created) once the
question is stored, and the answer rendered whole at the end, as its reader may read it."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.base_user import AbstractBaseUser

from chat import fragments
from chat.answering.stage_cpu import cpu_stage
from chat.models import Message
from chat.presenters import MessageView, message_views, searched_in, sources_from_event
from chat.selectors import answer_id_of, conversation_get
from chat.socket_request import Exchange
from chat.transcript import answer_row_read


@cpu_stage("render")
def sources_html(
    answer_id: str,
    citations: list[dict[str, Any]],
    evidence: str,
    searched_document: dict[str, Any] | None,
    searched_documents: list[dict[str, Any]],
) -> str:
    """The sources below the streamed answer `answer_id` and, for weak evidence, its notice
    above."""
    view = MessageView(
        id=answer_id,
        role=Message.Role.ASSISTANT,
        sources=sources_from_event(citations),
        searched_document=searched_in(
            str((searched_document or {}).get("title") or ""), searched_documents
        ),
        evidence=evidence,
    )
    return fragments.sources_html(view) + fragments.evidence_html(view)


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
def final_html(exchange: Exchange, *, user: AbstractBaseUser, conversation_id: str) -> str:
    """The exchange's answer, looked up in the socket's conversation `conversation_id` only
    (after a Stop the question id may be the client's, naming any conversation's), as `user`
    may read it (`message_views` withholds)."""
    in_here = conversation_id
    answer_id = exchange.final_id or answer_id_of(exchange.question_id, conversation_id=in_here)
    answer = answer_id and answer_row_read(answer_id, conversation_id=in_here)
    if not answer:
        return ""
    known = {answer.reply_to_id: exchange.question} if exchange.question else None
    view = message_views(
        [answer], user=user, can_post=True, questions=known, reader=exchange.reader
    )[0]
    if exchange.answer_id == str(answer.pk):
        return fragments.message_html(view, oob="true")
    if exchange.replace_target:
        return fragments.message_html(view, oob=f"outerHTML:{exchange.replace_target}")
    return fragments.append_to_messages(fragments.message_html(view))
