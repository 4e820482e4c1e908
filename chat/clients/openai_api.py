"""The OpenAI-compatible API under /v1: `GET /v1/models`, `GET /v1/models/{id}` and
`POST /v1/chat/completions` (streamed or not), for chat front ends and scripts that speak the
OpenAI protocol. Thin async views: authentication and admission are those of POST /api/chat
(`chat.api.authentication.token_user` then `staff_throttled`: the rate limit and the flood
rule), the answer is the one pipeline's (`answer_stream`), the wire format is
`chat.clients.openai_format`'s, the folding of events `chat.clients.answers.AnswerFold`.

Each completion is an exchange of a private conversation of the token's user: the one named by
`metadata.conversation_id` (or the `X-Sourced-Conversation-Id` header); else the user's
conversation whose questions are the request's earlier user messages (a client that resends the
whole conversation continues it, so follow-ups are read in context); else a new one. The id is
returned in the `X-Sourced-Conversation-Id` header and in `sourced.conversation_id`.
"""

from __future__ import annotations

import functools
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing

from channels.db import database_sync_to_async
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from chat.answering.events import Event
from chat.answering.pipeline import AnswerOptions, answer_stream
from chat.api.authentication import staff_throttled
from chat.api.views import SSE_HEADERS
from chat.clients import openai_format as f
from chat.clients.answers import (
    AnswerFold,
    conversation_continued,
    conversation_of_question,
    message_id_for,
    staff_token_user,
)
from chat.errors import AnswerError
from chat.ratelimit import Throttled, throttled_message


def _database_errors(view: Callable[..., Awaitable[HttpResponse]]):
    """A database that cannot be reached answers 503 in OpenAI's error shape (with
    Retry-After), as the rest of the site does (config/middleware.py) but in the shape the
    client libraries read."""

    @functools.wraps(view)
    async def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        try:
            return await view(request, *args, **kwargs)
        except (OperationalError, InterfaceError):
            return f.openai_error(
                "upstream-unavailable",
                f.UNAVAILABLE_MESSAGE,
                status=503,
                headers={"Retry-After": str(f.RETRY_AFTER_SECONDS)},
            )

    return wrapped


def _user(request: HttpRequest) -> AbstractBaseUser:
    return staff_token_user(request.headers.get("Authorization", ""))


def _admit(request: HttpRequest) -> tuple[AbstractBaseUser, Throttled | None]:
    user = _user(request)
    return user, staff_throttled(user)


def _method_not_allowed(request: HttpRequest, allowed: str) -> JsonResponse:
    return f.openai_error(
        "method-not-allowed",
        f'Method "{request.method}" not allowed.',
        status=405,
        headers={"Allow": allowed},
    )


@csrf_exempt
@_database_errors
async def models_list(request: HttpRequest) -> HttpResponse:
    """GET /v1/models: the one model, `sourced` (answers in the admin's answering mode)."""
    if request.method != "GET":
        return _method_not_allowed(request, "GET")
    try:
        await database_sync_to_async(_user)(request)
    except AnswerError as error:
        return f.answer_error(error)
    return JsonResponse(f.models_body())


@csrf_exempt
@_database_errors
async def model_detail(request: HttpRequest, model_id: str) -> HttpResponse:
    """GET /v1/models/{id}."""
    if request.method != "GET":
        return _method_not_allowed(request, "GET")
    try:
        await database_sync_to_async(_user)(request)
    except AnswerError as error:
        return f.answer_error(error)
    if model_id != f.MODEL_ID:
        message = f"The model {model_id!r} does not exist."
        return f.openai_error("model_not_found", message, status=404)
    return JsonResponse(f.model_body())


def _conversation_for(
    user: AbstractBaseUser, parsed: f.CompletionRequest, message_id: uuid.UUID
) -> tuple[uuid.UUID | str, bool]:
    """The conversation named by the client; else the one of a retried question; else the
    one whose questions are the earlier user messages; else a new one. And whether it is the
    new one (no earlier question)."""
    if parsed.conversation_id:
        return parsed.conversation_id, False
    found = conversation_of_question(user, message_id) or conversation_continued(
        user, parsed.earlier_questions
    )
    return (found, False) if found else (uuid.uuid4(), True)


@csrf_exempt
@_database_errors
async def chat_completions(request: HttpRequest) -> HttpResponse:
    """POST /v1/chat/completions: see `chat.clients.openai_schema` for the contract."""
    if request.method != "POST":
        return _method_not_allowed(request, "POST")
    try:
        user, throttled = await database_sync_to_async(_admit)(request)
    except AnswerError as error:
        return f.answer_error(error)
    if throttled is not None:
        retry_after = str(throttled.retry_after)
        return f.openai_error(
            "rate-limited",
            throttled_message(throttled),
            status=429,
            headers={"Retry-After": retry_after},
        )
    try:
        payload = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError):
        return f.openai_error("bad-request", "The request body is not valid JSON.", status=400)
    try:
        parsed = f.completion_request_parse(payload, request.headers)
        message_id = message_id_for(user, parsed.message_id)
        conversation_id, new = await database_sync_to_async(_conversation_for)(
            user, parsed, message_id
        )
    except AnswerError as error:
        return f.answer_error(error)

    stream = answer_stream(
        user=user,
        question=parsed.question,
        message_id=message_id,
        conversation_id=conversation_id,
        is_private=True,
        options=AnswerOptions(file_ids=parsed.file_ids),
        conversation_empty=new,
    )
    fold = AnswerFold(base_url=request.build_absolute_uri("/"))
    # Up to the first decisive event: bad input, or a failure before any text, is an error
    # response with its status.
    head: list[Event] = []
    try:
        async for event in stream:
            head.append(event)
            fold.add(event)
            if event.type != "warning":
                break
    except AnswerError as error:
        return f.answer_error(error)
    if not head or head[-1].type == "error":
        await stream.aclose()
        error = fold.error or {"code": "internal", "message": "Something went wrong."}
        return f.openai_error(error["code"], error["message"] or "Something went wrong.")
    headers = {f.CONVERSATION_HEADER: fold.conversation_id}
    if parsed.stream:
        return StreamingHttpResponse(
            _chunks(fold, stream),
            content_type="text/event-stream",
            headers={**SSE_HEADERS, **headers},
        )
    async with aclosing(stream):
        async for event in stream:
            fold.add(event)
    if fold.outcome == "error" and fold.error is not None:
        return f.openai_error(fold.error["code"], fold.error["message"])
    return JsonResponse(f.completion_body(fold), headers=headers)


async def _chunks(fold: AnswerFold, stream: AsyncIterator[Event]) -> AsyncIterator[bytes]:
    """The answer as chat.completion.chunk frames: the role, the text as it streams (a
    refusal's text at once), the ending (notice, suggestions, Sources) and the final chunk
    with `finish_reason` and `sourced`; then `data: [DONE]`. Closing this closes the pipeline
    (which records the interruption)."""
    created = int(time.time())
    async with aclosing(stream):
        yield f.chunk_frame(fold, delta={"role": "assistant", "content": ""}, created=created)
        if fold.outcome == "refused":
            yield f.chunk_frame(fold, delta={"content": fold.text}, created=created)
        async for event in stream:
            fold.add(event)
            if event.type == "answer_delta":
                yield f.chunk_frame(fold, delta={"content": event.data["text"]}, created=created)
            elif event.type == "error":
                yield f.error_frame(fold.error["code"], fold.error["message"])
                yield f.DONE_FRAME
                return
        ending = fold.ending()
        if ending:
            yield f.chunk_frame(fold, delta={"content": ending}, created=created)
        yield f.chunk_frame(fold, delta={}, created=created, finish_reason="stop", extension=True)
        yield f.DONE_FRAME
