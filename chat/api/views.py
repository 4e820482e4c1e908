"""The JSON/SSE API: thin adapters that parse, call one service or selector, and render.

Every endpoint is for staff (token or session authentication); errors are the envelope of
`chat.api.errors`. `POST /api/chat` is an async Django view (DRF views are synchronous and would
buffer the stream); it authenticates like DRF does. What each operation takes and answers is
documented in `chat.api.schema`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import aclosing

from channels.db import database_sync_to_async
from django.contrib.auth.base_user import AbstractBaseUser
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import status
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat import selectors, services
from chat.answering.events import Event
from chat.answering.pipeline import AnswerOptions, answer_stream
from chat.answering.questions import text_clean
from chat.api import schema
from chat.api import serializers as s
from chat.api.authentication import request_user, staff_throttled
from chat.api.errors import (
    answer_error_response,
    error_response,
    rate_limited_response,
    validation_error_response,
)
from chat.api.one_shot import answer_json
from chat.api.transcript import message_list_json, renders_compact_json
from chat.documents import documents_list
from chat.errors import AnswerError
from chat.history import conversations_page
from chat.ids import uuid_parse
from chat.models import Feedback
from chat.ratelimit import Throttled, search_rate_limited, throttled_message
from chat.transcript import conversation_transcript
from knowledge.access import reader_for
from knowledge.retrieval import chunks_search

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
RATINGS = {"up": Feedback.Rating.UP, "down": Feedback.Rating.DOWN}


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
    return user, staff_throttled(user)


@csrf_exempt
async def chat_api(request: HttpRequest) -> HttpResponse:
    """POST /api/chat: see `chat.api.schema.chat` for the contract (`stream: false`: one JSON
    body, `chat.api.one_shot`)."""
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
            file_ids=data.get("file_ids"),
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
    if not data["stream"]:
        return await answer_json(head, stream)
    return StreamingHttpResponse(
        _sse(head, stream), content_type="text/event-stream", headers=SSE_HEADERS
    )


# --- Conversations -------------------------------------------------------------------------------
class ConversationListApi(APIView):
    @schema.conversations_list
    def get(self, request: Request) -> Response:
        serializer = s.ConversationListInputSerializer(data=request.query_params)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        search = " ".join(text_clean(data.get("q", "")).split())[:200]
        page = conversations_page(
            user=request.user, title_search=search, limit=data["limit"], after=data.get("cursor")
        )
        groups = {
            "shared": page.shared,
            "private": page.private,
            "next_cursor": page.next_cursor.encode() if page.next_cursor else None,
        }
        return Response(s.ConversationGroupsSerializer(groups, context={"request": request}).data)


class ConversationDetailApi(APIView):
    @schema.conversation_get
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for(
            request.user, uuid_parse(conversation_id, "conversation_id")
        )
        return Response(s.ConversationSerializer(conversation, context={"request": request}).data)

    @schema.conversation_rename
    def patch(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for(
            request.user, uuid_parse(conversation_id, "conversation_id")
        )
        serializer = s.ConversationUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        conversation = services.conversation_rename(
            conversation=conversation, user=request.user, title=serializer.validated_data["title"]
        )
        return Response(s.ConversationSerializer(conversation, context={"request": request}).data)

    @schema.conversation_delete
    def delete(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for(
            request.user, uuid_parse(conversation_id, "conversation_id")
        )
        services.conversation_delete(conversation=conversation, user=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConversationMessagesApi(APIView):
    @schema.conversation_messages
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = selectors.conversation_get_for(
            request.user, uuid_parse(conversation_id, "conversation_id")
        )
        services.answers_release_stale(conversation=conversation)
        messages = conversation_transcript(conversation, user=reader_for(request.user))
        if renders_compact_json(request):
            return HttpResponse(
                message_list_json(conversation, messages, request=request),
                content_type=JSONRenderer.media_type,
            )
        body = {"conversation": conversation, "messages": messages}
        return Response(s.MessageListSerializer(body, context={"request": request}).data)


class MessageFeedbackApi(APIView):
    @schema.message_feedback
    def post(self, request: Request, message_id: str) -> Response:
        message = selectors.message_get_for(request.user, uuid_parse(message_id, "message_id"))
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
    @schema.documents_list
    def get(self, request: Request) -> Response:
        documents = documents_list(request.user)
        return Response(s.DocumentListSerializer({"documents": documents}).data)


class SearchApi(APIView):
    @schema.search
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
        result = chunks_search(query=query, reader=reader_for(request.user), top_k=top_k, mode=mode)
        body = {
            "query": query,
            "mode": mode,
            "top_k": top_k,
            "truncated": result.truncated,
            "results": [chunk.as_dict() for chunk in result.chunks],
        }
        return Response(s.SearchResultSerializer(body).data)
