"""The API's OpenAPI description: what each operation takes, answers and its errors mean
(`extend_schema` per operation, applied by `chat.api.views`), and the documented twin of the
async streaming view (`ChatApiSchema`), which drf-spectacular cannot enumerate."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.api import serializers as s
from chat.history import PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX

CHAT_PATH = "/api/chat"

# What each error status means on this API (every one is the error envelope); an operation may
# say more for a status of its own.
ERROR_MEANINGS = {
    400: "bad-request: a malformed UUID (in the path or the body) or a body that is not JSON.",
    401: "unauthorized: no credentials, or an invalid token.",
    403: "forbidden: not a staff user, the owner's right is needed, or a session request "
    "without its CSRF token.",
    404: "not-found: no such resource, or not visible to you (another user's private one).",
    405: "method-not-allowed: see the Allow header.",
    409: "conflict: the same message_id is still being answered.",
    415: "unsupported-media-type: the body must be JSON (Content-Type: application/json).",
    422: "validation-failed: `details` holds the messages of each field.",
    429: "rate-limited: wait Retry-After seconds.",
    500: "internal: something went wrong on our side.",
    503: "upstream-unavailable: the database (or, for answers, the language model) cannot be "
    "reached right now; try again after Retry-After seconds.",
}


def _retry_after(*statuses: int) -> OpenApiParameter:
    return OpenApiParameter(
        "Retry-After",
        OpenApiTypes.INT,
        OpenApiParameter.HEADER,
        description="Seconds to wait before trying again.",
        response=list(statuses),
    )


RETRY_AFTER = _retry_after(429, 503)
RETRY_AFTER_OUTAGE = _retry_after(503)
PATH_ID_DESCRIPTION = "A UUID (400 bad-request when malformed)."


def error_responses(*statuses: int, **meanings: str) -> dict:
    """The documented error responses: `statuses` with their usual meaning, and per status
    (`s422="..."`) a meaning of the operation's own. A database outage can answer any request
    with a 503, so every operation documents it."""
    documented = {
        **dict.fromkeys(statuses),
        **{int(key[1:]): text for key, text in meanings.items()},
    }
    documented.setdefault(503, None)
    return {
        status: OpenApiResponse(
            response=s.ErrorEnvelopeSerializer,
            description=documented[status] or ERROR_MEANINGS[status],
        )
        for status in sorted(documented)
    }


def _path_id(name: str) -> OpenApiParameter:
    return OpenApiParameter(
        name, OpenApiTypes.UUID, OpenApiParameter.PATH, description=PATH_ID_DESCRIPTION
    )


CONVERSATION_ID = _path_id("conversation_id")
MESSAGE_ID = _path_id("message_id")


SSE_DESCRIPTION = """
Ask a question. The answer streams as **Server-Sent Events** (`text/event-stream`), each frame
`event: <type>` + `data: <json>`, in this order:

- `warning` `{message}` — optional: the question was longer than the embedding model reads
  (only its beginning was used to search); the generative mode is on but this answer is
  extractive (no model configured, or the model is failing); or, after the text, a generative
  answer cites none of the sources ("Not grounded in the documents").
- `answer_start` `{conversation_id, message_id, reply_to, title, is_private, search_query}` —
  once; `message_id` is the answer's id, `reply_to` is your `message_id`, `search_query` what
  was searched: your message, or a follow-up ("And in London?") read with the conversation's
  previous questions ("What is the nightly hotel cap in? And in London?").
- `answer_delta` `{text}` — one or more; append them. Each sentence is followed by its
  citation marker ` [n]`.
- `sources` `{message_id, evidence, citations: [{n, chunk_id, chunk_index, document_id, title,
  page, section, sheet, cells, ocr_confidence, url, excerpt, text, similarity, stale}],
  searched_document, searched_documents}` — once, after the
  text: exactly the cited chunks. `evidence` is `"weak"` when the evidence cleared the check
  only narrowly: the documents may not answer the question directly (show the answer with a
  notice, as the page does); `"strong"` otherwise. `searched_document` `{id, title}` when your
  message named a document you may read ("In the staff handbook, …", "What does the refund
  policy say …") and the answer was found in it alone; null otherwise (no document named, or
  the named one did not hold the answer and everything you may read was searched).
  `searched_documents` `[{id, title}]`: every document your message named and the answer was
  searched in ("Compare inventory.xlsx and suppliers.csv": both, each cited when it holds
  an answer; `searched_document` is the first), `[]` when none.
- `answer_end` `{message_id, status}` — last (`complete`).
- `error` `{code, message}` — last, if answering failed after it started
  (`upstream-unavailable` when the language model broke off; the partial answer is kept).

In the generative mode a language model writes the text (Markdown, citing sources as `[n]`;
markers naming no source given to it are removed before they are sent). When the model cannot
answer at all, the response is a 503 `upstream-unavailable` error envelope.

When the knowledge base is empty, or nothing in it is close enough to the question (best
cosine similarity below the evidence threshold), the answer is a **refusal**, returned as plain
JSON with status 200 (`type: "refusal"`, the message and suggestions). Errors before the stream
starts are JSON error envelopes.

The same `message_id` sent again (retry, double click, a second connection, even concurrently)
is answered once: the repeat receives the stored answer (the same events, the text as a single
delta; or the same refusal JSON). If the first request is still streaming, the repeat waits for
it (409 `conflict` after a while). A client that disconnects mid-stream leaves the partial
answer stored with status `interrupted`; `regenerate: true` answers the question again.

With `stream: false` the answer comes as one JSON body once complete (status 200,
`type: "answer"`): the `answer_start` ids, `content` (the deltas joined), `status`, the
`sources` event's `evidence`, `citations` and `searched_document`, and `warning` (the
`warning` events' messages, else null). A refusal is the same JSON as above; an error, the
error envelope.

Rate limit: 20 chat requests per minute per user (429 `rate-limited` with `Retry-After`).
"""

SSE_EXAMPLE = (
    'event: answer_start\ndata: {"conversation_id": "3b9d…", "message_id": "9f1c…", '
    '"reply_to": "5e2a…", "title": "How many days of annual leave do I get?", '
    '"is_private": false, "search_query": "How many days of annual leave do I get?"}\n\n'
    'event: answer_delta\ndata: {"text": "Full-time employees receive 25 days of"}\n\n'
    'event: answer_delta\ndata: {"text": " paid annual leave per calendar year."}\n\n'
    'event: answer_delta\ndata: {"text": " [1]"}\n\n'
    'event: sources\ndata: {"message_id": "9f1c…", "evidence": "strong", "citations": [{"n": 1, '
    '"chunk_id": 12, "chunk_index": 4, '
    '"document_id": 3, "title": "Staff handbook", "page": 3, "section": "Leave > Annual '
    'leave", "sheet": null, "cells": null, "ocr_confidence": null, "url": "/documents/3/", '
    '"excerpt": "Full-time '
    'employees receive…", "text": "…", '
    '"similarity": 0.71, "stale": false}], "searched_document": null, '
    '"searched_documents": []}\n\n'
    'event: answer_end\ndata: {"message_id": "9f1c…", "status": "complete"}\n\n'
)


# --- POST /api/chat ----------------------------------------------------------------------------
chat = extend_schema(
    operation_id="chat",
    summary="Ask a question (streamed answer)",
    description=SSE_DESCRIPTION,
    request=s.ChatRequestSerializer,
    responses={
        (200, "text/event-stream"): OpenApiResponse(
            response=OpenApiTypes.STR,
            description="The answer as SSE frames.",
            examples=[OpenApiExample("A cited answer", value=SSE_EXAMPLE)],
        ),
        (200, "application/json"): OpenApiResponse(
            response=PolymorphicProxySerializer(
                component_name="ChatJson",
                serializers={"refusal": s.RefusalSerializer, "answer": s.OneShotAnswerSerializer},
                resource_type_field_name="type",
            ),
            description='A refusal (`type: "refusal"`), or with `stream: false` the whole '
            'answer (`type: "answer"`).',
        ),
        **error_responses(
            400,
            401,
            403,
            409,
            429,
            500,
            503,
            s404="not-found: `conversation_id` names another user's private conversation, "
            "`regenerate` names a question that was never asked, or `document_ids` names a "
            "document that does not exist or that you may not read (`details.document_ids`).",
            s422="validation-failed: the message is empty once control characters are removed "
            "or too long, or another field is out of range; `details` per field.",
        ),
    },
    parameters=[RETRY_AFTER],
    tags=["chat"],
)


class ChatApiSchema(APIView):
    """Documentation only: the OpenAPI description of the async view `chat_api`, added to the
    schema by `chat.api.schema.add_chat_endpoint` (it is never routed)."""

    @chat
    def post(self, request: Request) -> Response:  # pragma: no cover - never routed
        raise NotImplementedError


# --- The other operations ------------------------------------------------------------------------
conversations_list = extend_schema(
    operation_id="conversations_list",
    summary="Your conversations: shared ones and your private ones, newest first, a page at a time",
    description="Cursor-paginated: each page holds at most `limit` conversations (shared and "
    "private together, newest first) and a `next_cursor`; pass it back as `cursor` for the "
    "next page, until it is null. A cursor this server did not give is refused with 422.",
    parameters=[
        OpenApiParameter("q", str, description="Only titles containing this."),
        OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": PAGE_SIZE_MAX},
            description=f"Conversations per page (1 to {PAGE_SIZE_MAX}, default "
            f"{PAGE_SIZE_DEFAULT}).",
        ),
        OpenApiParameter(
            "cursor", str, description="The previous page's `next_cursor`; omitted: the first."
        ),
        RETRY_AFTER_OUTAGE,
    ],
    responses={200: s.ConversationGroupsSerializer, **error_responses(401, 403, 422)},
    tags=["conversations"],
)

conversation_get = extend_schema(
    operation_id="conversation_get",
    summary="A conversation",
    parameters=[CONVERSATION_ID, RETRY_AFTER_OUTAGE],
    responses={200: s.ConversationSerializer, **error_responses(400, 401, 403, 404)},
    tags=["conversations"],
)

conversation_rename = extend_schema(
    operation_id="conversation_rename",
    summary="Rename a conversation (owner only)",
    request=s.ConversationUpdateSerializer,
    parameters=[CONVERSATION_ID, RETRY_AFTER_OUTAGE],
    responses={
        200: s.ConversationSerializer,
        **error_responses(
            400, 401, 404, 415, 422, s403="forbidden: only the owner renames a conversation."
        ),
    },
    tags=["conversations"],
)

conversation_delete = extend_schema(
    operation_id="conversation_delete",
    summary="Delete a conversation (owner only)",
    parameters=[CONVERSATION_ID, RETRY_AFTER_OUTAGE],
    responses={
        204: None,
        **error_responses(400, 401, 404, s403="forbidden: only the owner deletes a conversation."),
    },
    tags=["conversations"],
)

conversation_messages = extend_schema(
    operation_id="conversation_messages",
    summary="A conversation's messages with their citations",
    description="Citations are the snapshot taken when the answer was given: identical on "
    "every reload; `stale` tells that the cited chunk has changed or gone since.",
    parameters=[CONVERSATION_ID, RETRY_AFTER_OUTAGE],
    responses={200: s.MessageListSerializer, **error_responses(400, 401, 403, 404)},
    tags=["conversations"],
)

message_feedback = extend_schema(
    operation_id="message_feedback",
    summary="Thumbs up or down on an answer (again: replaces your earlier rating)",
    request=s.FeedbackInputSerializer,
    description="Feedback is given on answers only: a `message_id` of a question (a user "
    "message) names no answer, 404 not-found.",
    parameters=[MESSAGE_ID, RETRY_AFTER_OUTAGE],
    responses={
        200: s.FeedbackSerializer,
        **error_responses(
            400,
            401,
            403,
            415,
            s404="not-found: no answer with this id (a question's id names none: feedback is "
            "given on answers only), or not visible to you.",
            s422="validation-failed: the rating or comment is invalid.",
        ),
    },
    tags=["conversations"],
)

documents_list = extend_schema(
    operation_id="documents_list",
    summary="The knowledge base's documents (for filters)",
    parameters=[RETRY_AFTER_OUTAGE],
    responses={200: s.DocumentListSerializer, **error_responses(401, 403)},
    tags=["knowledge"],
)

search = extend_schema(
    operation_id="search",
    summary="Search the knowledge base (ranked chunks, no answer)",
    parameters=[s.SearchInputSerializer, RETRY_AFTER],
    responses={200: s.SearchResultSerializer, **error_responses(401, 403, 422, 429)},
    tags=["knowledge"],
)


def add_chat_endpoint(endpoints: list, **kwargs) -> list:
    """PREPROCESSING_HOOKS entry: document POST /api/chat."""
    if any(path == CHAT_PATH for path, *_ in endpoints):
        return endpoints
    return [*endpoints, (CHAT_PATH, r"^api/chat$", "POST", ChatApiSchema.as_view())]
