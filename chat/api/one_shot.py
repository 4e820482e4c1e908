"""`POST /api/chat` with `stream: false`: the same answer as the stream, as one JSON body.

The view reads the pipeline's events (`chat.answering.events`) to the end and folds them here:
`answer_start`'s ids, the deltas' text, `sources`' citations and evidence, `answer_end`'s status
and the warnings. Nothing is answered differently: the answer is stored, replayed for a repeated
`message_id`, rate limited and logged exactly as a streamed one. An `error` after the start is
the error envelope the stream's error would be (the partial answer stays stored).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from django.http import HttpResponse, JsonResponse

from chat.answering.events import Event
from chat.api.errors import answer_error_response, error_response
from chat.errors import AnswerError


def answer_body(events: list[Event]) -> dict[str, Any]:
    """The JSON body of a streamed answer's events (answer_start ... answer_end)."""
    start = next(e.data for e in events if e.type == "answer_start")
    sources = next((e.data for e in events if e.type == "sources"), {})
    end = next((e.data for e in events if e.type == "answer_end"), {})
    warnings = [e.data["message"] for e in events if e.type == "warning"]
    return {
        "type": "answer",
        **start,
        "content": "".join(e.data["text"] for e in events if e.type == "answer_delta"),
        "status": end.get("status", ""),
        "evidence": sources.get("evidence", ""),
        "citations": sources.get("citations", []),
        "searched_document": sources.get("searched_document"),
        "searched_documents": sources.get("searched_documents") or [],
        "warning": " ".join(warnings) or None,
    }


async def answer_json(head: list[Event], stream: AsyncIterator[Event]) -> HttpResponse:
    """The answer whose first events are `head` and the rest `stream`, read to its end, as one
    JSON response (closing `stream` when the client goes away: the pipeline then stores the
    answer as interrupted, as for a stream)."""
    events = list(head)
    try:
        async with aclosing(stream):
            async for event in stream:
                events.append(event)
    except AnswerError as error:
        return answer_error_response(error)
    error = next((e.data for e in events if e.type == "error"), None)
    if error is not None:
        code = error.get("code", "internal")
        return error_response(
            code,
            error.get("message") or "Something went wrong.",
            status=503 if code == "upstream-unavailable" else 500,
        )
    return JsonResponse(answer_body(events), status=200)
