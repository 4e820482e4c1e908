"""The JSON/SSE API: thin adapters that parse, call one service or selector, and render.

Every endpoint is for staff (token or session authentication); errors are the envelope of
`chat.api.errors`. `POST /api/chat` is an async Django view (DRF views are synchronous and would
buffer the stream); it authenticates like DRF does and is documented by `ChatApiSchema`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing

from channels.db import database_sync_to_async
from django.contrib.auth.base_user import AbstractBaseUser
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat import selectors, services
from chat.answering.errors import AnswerError
from chat.answering.events import Event
from chat.answering.pipeline import AnswerOptions, answer_stream
from chat.answering.questions import text_clean
from chat.api import serializers as s
from chat.api.authentication import request_user
from chat.api.errors import (
    answer_error_response,
    error_response,
    rate_limited_response,
    validation_error_response,
)
from chat.api.transcript import message_list_json, renders_compact_json
from chat.models import Feedback
from chat.ratelimit import Throttled, chat_throttled, search_rate_limited, throttled_message
from knowledge.retrieval import chunks_search

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
RATINGS = {"up": Feedback.Rating.UP, "down": Feedback.Rating.DOWN}


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


def _errors(*statuses: int, **meanings: str) -> dict:
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


def _uuid_param(value: str, name: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise AnswerError.bad_request(
            f"{name} is not a valid UUID.", details={name: ["Must be a valid UUID."]}
        ) from None


# --- POST /api/chat (SSE) ------------------------------------------------------------------------
def sse_frame(event: Event) -> bytes:
    data = json.dumps(event.data, ensure_ascii=False, default=str)
    return f"event: {event.type}\ndata: {data}\n\n".encode()


async def _sse(head: list[Event], stream: AsyncIterator[Event]) -> AsyncIterator[bytes]:
    """The events as SSE frames; closing this closes the pipeline (which then records the
    interruption)."""
    async with aclosing(stream):
        for event in head:
            yield sse_frame(event)
        async for event in stream:
            yield sse_frame(event)


def _admit(request: HttpRequest) -> tuple[AbstractBaseUser, Throttled | None]:
    """The staff user of the request and, counting this request, whether it must wait (the
    rate limit or the flood rule; one thread hop for all)."""
    user = request_user(request)
    if not user.is_staff:
        raise AnswerError.forbidden("The API is for staff only.")
    return user, chat_throttled(user)


@csrf_exempt
async def chat_api(request: HttpRequest) -> HttpResponse:
    """POST /api/chat: see ChatApiSchema.post for the contract."""
    if request.method != "POST":
        return error_response(
            "method-not-allowed",
            f'Method "{request.method}" not allowed.',
            status=405,
            headers={"Allow": "POST"},
        )
    try:
        user, throttled = await database_sync_to_async(_admit)(request)
    except AnswerError as error:
        return answer_error_response(error)
    if throttled is not None:
        return rate_limited_response(throttled.retry_after, throttled_message(throttled))
    try:
        payload = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return error_response("bad-request", "The request body is not valid JSON.", status=400)
    if not isinstance(payload, dict):
        return error_response("bad-request", "The request body must be a JSON object.", status=400)
    serializer = s.ChatRequestSerializer(data=payload)
    if not serializer.is_valid():
        return validation_error_response(serializer.errors)
    data = serializer.validated_data

    stream = answer_stream(
        user=user,
        question=data["message"],
        message_id=data["message_id"],
        conversation_id=data.get("conversation_id"),
        is_private=data["is_private"],
        options=AnswerOptions(
            top_k=data.get("top_k"),
            document_ids=data.get("document_ids"),
            embedding=data.get("embedding"),
            regenerate=data["regenerate"],
        ),
    )
    # Read up to the first decisive event: a refusal or an early error is plain JSON.
    head: list[Event] = []
    try:
        async for event in stream:
            head.append(event)
            if event.type != "warning":
                break
    except AnswerError as error:
        return answer_error_response(error)
    decisive = head[-1] if head else Event("error", {"code": "internal", "message": ""})
    if decisive.type in ("refusal", "error"):
        await stream.aclose()
        warnings = [e.data["message"] for e in head if e.type == "warning"]
        if decisive.type == "error":
            code = decisive.data.get("code", "internal")
            return error_response(
                code,
                decisive.data.get("message") or "Something went wrong.",
                status=503 if code == "upstream-unavailable" else 500,
            )
        body = {"type": "refusal", **decisive.data, "warning": warnings[0] if warnings else None}
        return JsonResponse(body, status=200)
    return StreamingHttpResponse(
        _sse(head, stream), content_type="text/event-stream", headers=SSE_HEADERS
    )


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
  previous questions ("nightly hotel cap London").
- `answer_delta` `{text}` — one or more; append them. Each sentence is followed by its
  citation marker ` [n]`.
- `sources` `{message_id, citations: [{n, chunk_id, document_id, title, page, section, url,
  excerpt, text, similarity, stale}]}` — once, after the text: exactly the cited chunks.
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

Rate limit: 20 chat requests per minute per user (429 `rate-limited` with `Retry-After`).
"""

SSE_EXAMPLE = (
    'event: answer_start\ndata: {"conversation_id": "3b9d…", "message_id": "9f1c…", '
    '"reply_to": "5e2a…", "title": "How many days of annual leave do I get?", '
    '"is_private": false, "search_query": "How many days of annual leave do I get?"}\n\n'
    'event: answer_delta\ndata: {"text": "Full-time employees receive 25 days of"}\n\n'
    'event: answer_delta\ndata: {"text": " paid annual leave per calendar year."}\n\n'
    'event: answer_delta\ndata: {"text": " [1]"}\n\n'
    'event: sources\ndata: {"message_id": "9f1c…", "citations": [{"n": 1, "chunk_id": 12, '
    '"document_id": 3, "title": "Staff handbook", "page": 3, "section": "Leave > Annual '
    'leave", "sheet": null, "cells": null, "url": "/documents/3/", "excerpt": "Full-time '
    'employees receive…", "text": "…", '
    '"similarity": 0.71, "stale": false}]}\n\n'
    'event: answer_end\ndata: {"message_id": "9f1c…", "status": "complete"}\n\n'
)


class ChatApiSchema(APIView):
    """Documentation only: the OpenAPI description of the async view `chat_api`, added to the
    schema by `chat.api.schema.add_chat_endpoint` (it is never routed)."""

    @extend_schema(
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
                response=s.RefusalSerializer, description="A refusal."
            ),
            **_errors(
                400,
                401,
                403,
                409,
                429,
                500,
                503,
                s404="not-found: `conversation_id` names another user's private conversation, or "
                "`regenerate` names a question that was never asked.",
                s422="validation-failed: the message is empty once control characters are removed "
                "or too long, or another field is out of range; `details` per field.",
            ),
        },
        parameters=[RETRY_AFTER],
        tags=["chat"],
    )
    def post(self, request: Request) -> Response:  # pragma: no cover - never routed
        raise NotImplementedError


# --- Conversations -------------------------------------------------------------------------------
class ConversationListApi(APIView):
    @extend_schema(
        operation_id="conversations_list",
        summary="Your conversations: shared ones and your private ones, newest first",
        parameters=[
            OpenApiParameter("q", str, description="Only titles containing this."),
            RETRY_AFTER_OUTAGE,
        ],
        responses={200: s.ConversationGroupsSerializer, **_errors(401, 403)},
        tags=["conversations"],
    )
    def get(self, request: Request) -> Response:
        search = " ".join(text_clean(request.query_params.get("q", "")).split())[:200]
        shared, private = selectors.conversation_groups_for(request.user, search=search)
        groups = {"shared": shared, "private": private}
        return Response(s.ConversationGroupsSerializer(groups, context={"request": request}).data)


class ConversationDetailApi(APIView):
    @extend_schema(
        operation_id="conversation_get",
        summary="A conversation",
        parameters=[CONVERSATION_ID, RETRY_AFTER_OUTAGE],
        responses={200: s.ConversationSerializer, **_errors(400, 401, 403, 404)},
        tags=["conversations"],
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for(
            request.user, _uuid_param(conversation_id, "conversation_id")
        )
        return Response(s.ConversationSerializer(conversation, context={"request": request}).data)

    @extend_schema(
        operation_id="conversation_rename",
        summary="Rename a conversation (owner only)",
        request=s.ConversationUpdateSerializer,
        parameters=[CONVERSATION_ID, RETRY_AFTER_OUTAGE],
        responses={
            200: s.ConversationSerializer,
            **_errors(
                400, 401, 404, 415, 422, s403="forbidden: only the owner renames a conversation."
            ),
        },
        tags=["conversations"],
    )
    def patch(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for(
            request.user, _uuid_param(conversation_id, "conversation_id")
        )
        serializer = s.ConversationUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        conversation = services.conversation_rename(
            conversation=conversation, user=request.user, title=serializer.validated_data["title"]
        )
        return Response(s.ConversationSerializer(conversation, context={"request": request}).data)

    @extend_schema(
        operation_id="conversation_delete",
        summary="Delete a conversation (owner only)",
        parameters=[CONVERSATION_ID, RETRY_AFTER_OUTAGE],
        responses={
            204: None,
            **_errors(400, 401, 404, s403="forbidden: only the owner deletes a conversation."),
        },
        tags=["conversations"],
    )
    def delete(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for(
            request.user, _uuid_param(conversation_id, "conversation_id")
        )
        services.conversation_delete(conversation=conversation, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationMessagesApi(APIView):
    @extend_schema(
        operation_id="conversation_messages",
        summary="A conversation's messages with their citations",
        description="Citations are the snapshot taken when the answer was given: identical on "
        "every reload; `stale` tells that the cited chunk has changed or gone since.",
        parameters=[CONVERSATION_ID, RETRY_AFTER_OUTAGE],
        responses={200: s.MessageListSerializer, **_errors(400, 401, 403, 404)},
        tags=["conversations"],
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for(
            request.user, _uuid_param(conversation_id, "conversation_id")
        )
        services.answers_release_stale(conversation=conversation)
        messages = selectors.conversation_transcript(conversation)
        if renders_compact_json(request):
            return HttpResponse(
                message_list_json(conversation, messages, request=request),
                content_type=JSONRenderer.media_type,
            )
        body = {"conversation": conversation, "messages": messages}
        return Response(s.MessageListSerializer(body, context={"request": request}).data)


class MessageFeedbackApi(APIView):
    @extend_schema(
        operation_id="message_feedback",
        summary="Thumbs up or down on an answer (again: replaces your earlier rating)",
        request=s.FeedbackInputSerializer,
        description="Feedback is given on answers only: a `message_id` of a question (a user "
        "message) is refused with 422 validation-failed.",
        parameters=[MESSAGE_ID, RETRY_AFTER_OUTAGE],
        responses={
            200: s.FeedbackSerializer,
            **_errors(
                400,
                401,
                403,
                404,
                415,
                s422="validation-failed: the message is a question, not an answer (feedback is "
                "given on answers only), or the rating or comment is invalid.",
            ),
        },
        tags=["conversations"],
    )
    def post(self, request: Request, message_id: str) -> Response:
        message = selectors.message_get_for(request.user, _uuid_param(message_id, "message_id"))
        serializer = s.FeedbackInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        feedback = services.feedback_give(
            user=request.user,
            message=message,
            rating=RATINGS[serializer.validated_data["rating"]],
            comment=serializer.validated_data.get("comment", ""),
        )
        rating = "up" if feedback.rating == Feedback.Rating.UP else "down"
        return Response(
            s.FeedbackSerializer(
                {
                    "message_id": feedback.message_id,
                    "rating": rating,
                    "comment": feedback.comment,
                    "updated_at": feedback.updated_at,
                }
            ).data
        )


# --- Knowledge -----------------------------------------------------------------------------------
class DocumentListApi(APIView):
    @extend_schema(
        operation_id="documents_list",
        summary="The knowledge base's documents (for filters)",
        parameters=[RETRY_AFTER_OUTAGE],
        responses={200: s.DocumentListSerializer, **_errors(401, 403)},
        tags=["knowledge"],
    )
    def get(self, request: Request) -> Response:
        documents = selectors.documents_list(request.user)
        return Response(s.DocumentListSerializer({"documents": documents}).data)


class SearchApi(APIView):
    @extend_schema(
        operation_id="search",
        summary="Search the knowledge base (ranked chunks, no answer)",
        parameters=[s.SearchInputSerializer, RETRY_AFTER],
        responses={200: s.SearchResultSerializer, **_errors(401, 403, 422, 429)},
        tags=["knowledge"],
    )
    def get(self, request: Request) -> Response:
        retry_after = search_rate_limited(request.user)
        if retry_after is not None:
            return rate_limited_response(
                retry_after, f"Too many searches: try again in {retry_after} seconds."
            )
        serializer = s.SearchInputSerializer(data=request.query_params)
        serializer.is_valid(raise_exception=True)
        query = " ".join(text_clean(serializer.validated_data["q"]).split())
        if not query:
            raise AnswerError.validation("q", "The query is empty.")
        mode, top_k = serializer.validated_data["mode"], serializer.validated_data["top_k"]
        result = chunks_search(query=query, top_k=top_k, mode=mode)
        body = {
            "query": query,
            "mode": mode,
            "top_k": top_k,
            "truncated": result.truncated,
            "results": [chunk.as_dict() for chunk in result.chunks],
        }
        return Response(s.SearchResultSerializer(body).data)
