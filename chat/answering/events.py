"""The events of one answer, as every transport receives them (`docs/product.md §6`).

The answering pipeline (`chat.answering.pipeline.answer_stream`) yields these in order:
answer_start → answer_delta+ → sources → answer_end, or a single refusal / error (an error may
also end a stream that had started). Transports only render them: the SSE API as
`event:`/`data:` frames, the WebSocket consumer as HTML fragments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from chat.transcript import MessageRow

EventType = Literal[
    "answer_start", "answer_delta", "sources", "answer_end", "refusal", "error", "warning"
]


@dataclass(frozen=True)
class Event:
    type: EventType
    data: dict[str, Any] = field(default_factory=dict)
    # answer_end of an answer just answered: the answer's row as it was stored
    # (`chat.transcript.finished_answer_row`), for a transport rendering it whole at the end
    # without reading it back. Never sent to a client.
    row: MessageRow | None = field(default=None, compare=False, repr=False)

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.data}


INTERNAL_ERROR_MESSAGE = "Something went wrong while answering. Please try again."


def refusal_data(
    ids: dict[str, str], message: str, suggestions: list[str], search_query: str
) -> dict[str, Any]:
    """The data of a `refusal` event, live or replayed."""
    return {
        **ids,
        "message": message,
        "suggestions": list(suggestions),
        "search_query": search_query,
    }


def sources_data(
    message_id: str,
    citations: list[dict[str, Any]],
    evidence: str,
    searched_document: dict[str, Any] | None = None,
    searched_documents: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The data of a `sources` event, live or replayed: `evidence` is the stored answer's
    Message.Evidence ("strong", or "weak": shown with the weak-evidence notice, `docs/product.md
    §4`; "" for an answer stored before the check said); `searched_document` `{id, title}` the
    document the question named and the answer was found in alone, else None;
    `searched_documents` every document it named and was answered from (`[searched_document]`
    when one, `[]` when none)."""
    return {
        "message_id": message_id,
        "evidence": evidence,
        "citations": citations,
        "searched_document": searched_document,
        "searched_documents": (
            searched_documents
            if searched_documents is not None
            else ([searched_document] if searched_document else [])
        ),
    }
