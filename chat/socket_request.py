"""What the chat socket reads and keeps of a question: the composer's JSON read as the answering
core's arguments (`request_from`), what admitting it found (`Admission`) and what its running
answer has shown so far (`Exchange`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from accounts.sessions import Standing
from chat.answering.pipeline import AnswerOptions
from chat.errors import AnswerError
from chat.ids import uuid_parse
from chat.models import Message
from chat.ratelimit import Throttled
from chat.transcript import MessageRow
from knowledge.access import Reader
from pages.client_input import client_int


@dataclass(frozen=True)
class Admission:
    """What admitting a question found."""

    signed_in: str = Standing.SIGNED_IN  # the session's standing, read first
    throttled: Throttled | None = None  # refused by the rate limit or the flood rule
    locked: bool = False  # the conversation's in-flight lock was taken
    stored: tuple[Message | None, Message | None] = (None, None)  # question, answer
    reader: Reader | None = None  # the asker's, computed for this message


@dataclass
class Exchange:
    """What the running answer has shown so far."""

    question_id: str
    question: str = ""  # its text, when known (what the search query is compared with)
    replace_target: str = ""  # selector of the answer this one replaces (regenerate, retry)
    answer_id: str = ""  # set once the answer's bubble is on the page
    final_id: str = ""  # the answer's id, once an event named it (answer_start, refusal)
    warning: str = ""
    listed: bool = False  # the sidebar shows the conversation moved up by this question
    # What the answer's events sent this socket: its text (the deltas joined), its sources
    # ((n, chunk id) of each) and the cited documents' state they were shown with
    # (chat.documents), and whether answer_end came (after every delta and the sources).
    streamed: str = ""
    deltas: int = 0  # answer_delta events shown
    sent_citations: tuple[tuple[int, int | None], ...] = ()
    documents: dict[int, bool] | None = None
    ended: bool = False
    # The answer's row as the answering stored it (the answer_end event's), for its final
    # render (chat.socket_render.finished_html).
    finished: MessageRow | None = None
    reader: Reader | None = None  # the asker's, computed once for this message


def request_from(payload: dict[str, Any], action: str) -> dict[str, Any]:
    """The composer's JSON as the arguments of the socket's `_answer_locked`: the message id
    parsed, the options read from the form's strings; the question and the options' ranges are
    left to the answering core
    (docs/decisions/0050-questions-and-options-checked-once-by-the-core.md).

    Raises AnswerError: a malformed message id (400) or document filter (422)."""
    message_id = str(uuid_parse(payload.get("message_id"), "message_id"))
    top_k = payload.get("top_k")
    if top_k in ("", None):
        top_k = None
    else:
        with contextlib.suppress(ValueError):  # not a number: refused by the core
            top_k = client_int(top_k)
    document_ids = payload.get("document_ids") or None
    if isinstance(document_ids, (str, int)):
        document_ids = [document_ids]
    if document_ids is not None:
        try:
            document_ids = [client_int(pk, minimum=1) for pk in document_ids]
        except (TypeError, ValueError):
            raise AnswerError.validation(
                "document_ids", "The document filter is malformed."
            ) from None
    # The question is cleaned and checked by the answering core (`question_normalize`),
    # as for the API: what is shown in its bubble until then is what was typed.
    question = None if action == "regenerate" else payload.get("message")
    return {
        "action": action,
        "question": question,
        "message_id": message_id,
        "options": AnswerOptions(
            top_k=top_k,
            document_ids=document_ids,
            file_ids=payload.get("file_ids") or None,  # checked by the core
        ),
        "is_private": payload.get("is_private") in (True, "true", "on", "1"),
    }
