"""The OpenAI wire format of /v1: the request read (`completion_request_parse`), errors
(`openai_error`), the non-streamed completion and the streamed chunks.

Errors have OpenAI's shape, `{"error": {"message", "type", "code", "param"}}`, with the status
the client libraries map to their exceptions: 400 bad request, 401 authentication, 403
permission, 404 not found (an unknown model, conversation or document), 409 conflict, 422
unprocessable (validation), 429 rate limit (`Retry-After`), 500 internal, 503 unavailable.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from django.http import JsonResponse

from chat.clients.answers import AnswerFold
from chat.errors import STATUS_OF_CODE, AnswerError

MODEL_ID = "sourced"
MODEL_CREATED = 1767225600  # 2026-01-01: the model's listed creation time, stable
CONVERSATION_HEADER = "X-Sourced-Conversation-Id"
MAX_MESSAGES = 200
# A database that cannot be reached: the site's 503 (config/middleware.py), in these shapes.
UNAVAILABLE_MESSAGE = "Sourced cannot reach its database right now. Please try again in a moment."
RETRY_AFTER_SECONDS = 5

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "service_unavailable",
}


def openai_error(
    code: str,
    message: str,
    *,
    status: int | None = None,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    """An error response in OpenAI's shape (`code` is the pipeline's, e.g. "not-found")."""
    status = status or STATUS_OF_CODE.get(code, 400)
    body = {
        "error": {
            "message": message,
            "type": ERROR_TYPES.get(status, "invalid_request_error"),
            "code": code,
            "param": param,
        }
    }
    headers = dict(headers or {})
    if status == 401:
        headers.setdefault("WWW-Authenticate", 'Bearer realm="v1"')
    return JsonResponse(body, status=status, headers=headers)


def answer_error(error: AnswerError) -> JsonResponse:
    param = next(iter(error.details), None) if isinstance(error.details, dict) else None
    return openai_error(error.code, error.message, status=error.status, param=param)


def models_body() -> dict[str, Any]:
    return {"object": "list", "data": [model_body()]}


def model_body() -> dict[str, Any]:
    return {"id": MODEL_ID, "object": "model", "created": MODEL_CREATED, "owned_by": "sourced"}


@dataclass(frozen=True)
class CompletionRequest:
    """A /v1/chat/completions request as Sourced reads it."""

    question: str
    earlier_questions: list[str]  # the earlier user messages, oldest first
    stream: bool
    conversation_id: str | None
    message_id: str | None
    file_ids: list[int] | None


def _text_of(content: object, index: int) -> str:
    """A message's text: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part.get("text", "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        ]
        if all(isinstance(text, str) for text in texts):
            return "\n".join(texts)
    raise AnswerError.validation(
        f"messages[{index}].content", "A message's content must be text or a list of text parts."
    )


def _metadata_value(metadata: dict, name: str) -> str | None:
    value = metadata.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise AnswerError.validation(f"metadata.{name}", f"metadata.{name} must be a string.")
    return value


def completion_request_parse(payload: object, headers: Any) -> CompletionRequest:
    """The request body (parsed JSON) and headers read, or AnswerError (400/404/422).

    The question is the last message (role "user"); the earlier user messages are the
    conversation it follows. The conversation id comes from `metadata.conversation_id` or the
    `X-Sourced-Conversation-Id` header; the question's idempotency key from
    `metadata.message_id` or the `Idempotency-Key` header; `file_ids` (the asker's personal
    files) from the body. Other parameters (temperature, max_tokens, tools...) are ignored:
    the answer is built from the documents, not sampled.
    """
    if not isinstance(payload, dict):
        raise AnswerError.bad_request("The request body must be a JSON object.")
    model = payload.get("model")
    if not isinstance(model, str) or not model:
        raise AnswerError.validation("model", "model is required: use GET /v1/models.")
    if model != MODEL_ID:
        raise AnswerError("model_not_found", f"The model {model!r} does not exist.", status=404)
    messages = payload.get("messages")
    if not isinstance(messages, list) or not messages:
        raise AnswerError.validation("messages", "messages must be a non-empty list.")
    if len(messages) > MAX_MESSAGES:
        raise AnswerError.validation("messages", f"At most {MAX_MESSAGES} messages.")
    turns = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise AnswerError.validation(
                f"messages[{index}]", "Each message must be an object with a role."
            )
        turns.append((message["role"], _text_of(message.get("content", ""), index)))
    if turns[-1][0] != "user":
        raise AnswerError.validation("messages", "The last message must be the user's question.")
    stream = payload.get("stream", False)
    if not isinstance(stream, bool):
        raise AnswerError.validation("stream", "stream must be true or false.")
    metadata = payload.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise AnswerError.validation("metadata", "metadata must be an object.")
    file_ids = payload.get("file_ids")
    return CompletionRequest(
        question=turns[-1][1],
        earlier_questions=[text for role, text in turns[:-1] if role == "user"],
        stream=stream,
        conversation_id=_metadata_value(metadata, "conversation_id")
        or headers.get(CONVERSATION_HEADER)
        or None,
        message_id=_metadata_value(metadata, "message_id")
        or headers.get("Idempotency-Key")
        or None,
        file_ids=file_ids,
    )


def completion_id(fold: AnswerFold) -> str:
    return f"chatcmpl-{fold.message_id or 'none'}"


def completion_body(fold: AnswerFold) -> dict[str, Any]:
    """The non-streamed chat.completion: the full text, and `sourced` on the message."""
    return {
        "id": completion_id(fold),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": fold.full_text(),
                    "refusal": None,
                    "sourced": fold.extension(),
                },
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "sourced": fold.extension(),
    }


def chunk_frame(
    fold: AnswerFold,
    *,
    delta: dict[str, Any],
    created: int,
    finish_reason: str | None = None,
    extension: bool = False,
) -> bytes:
    """One `data: {chat.completion.chunk}` SSE frame; the last one carries `sourced`."""
    body: dict[str, Any] = {
        "id": completion_id(fold),
        "object": "chat.completion.chunk",
        "created": created,
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
    }
    if extension:
        body["sourced"] = fold.extension()
    return f"data: {json.dumps(body, ensure_ascii=False, default=str)}\n\n".encode()


def error_frame(code: str, message: str) -> bytes:
    """An error after the stream started (the partial answer is stored): OpenAI's streamed
    error, which the client libraries raise as APIError."""
    status = STATUS_OF_CODE.get(code, 500)
    error = {"message": message, "type": ERROR_TYPES.get(status, "server_error"), "code": code}
    return f"data: {json.dumps({'error': error}, ensure_ascii=False)}\n\n".encode()


DONE_FRAME = b"data: [DONE]\n\n"
