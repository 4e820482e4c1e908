"""The API's error envelope: `{"error": {"code", "message", "details"}}` on every error of every
/api/ URL — DRF exceptions and the chat core's AnswerError here; unknown URLs (404) and crashes
(500) through the site's error handlers (`config/errors.py`), which use `error_response`.

Codes and statuses (docs/product.md §6): bad-request 400, unauthorized 401, forbidden 403,
not-found 404, conflict 409, validation-failed 422 (details: messages per field), rate-limited
429 (with Retry-After), internal 500, upstream-unavailable 503; and, for HTTP's own cases,
method-not-allowed 405, not-acceptable 406, unsupported-media-type 415.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from rest_framework import exceptions
from rest_framework.views import set_rollback

from chat.errors import AnswerError

API_PREFIX = "/api/"
CODE_OF_STATUS = {
    400: "bad-request",
    401: "unauthorized",
    403: "forbidden",
    404: "not-found",
    405: "method-not-allowed",
    406: "not-acceptable",
    409: "conflict",
    415: "unsupported-media-type",
    422: "validation-failed",
    429: "rate-limited",
    500: "internal",
    503: "upstream-unavailable",
}
MALFORMED_UUID = "malformed-uuid"


def error_response(
    code: str,
    message: str,
    *,
    status: int,
    details: Any = None,
    headers: dict[str, str] | None = None,
) -> JsonResponse:
    body = {"error": {"code": code, "message": message, "details": details or {}}}
    return JsonResponse(body, status=status, headers=headers)


def rate_limited_response(retry_after: int, message: str) -> JsonResponse:
    """429 rate-limited, with Retry-After (seconds) in the header and the details."""
    return error_response(
        "rate-limited",
        message,
        status=429,
        details={"retry_after": retry_after},
        headers={"Retry-After": str(retry_after)},
    )


def answer_error_response(
    error: AnswerError, headers: dict[str, str] | None = None
) -> JsonResponse:
    if error.code == "unauthorized":
        headers = {"WWW-Authenticate": 'Token realm="api"', **(headers or {})}
    return error_response(
        error.code, error.message, status=error.status, details=error.details, headers=headers
    )


def validation_error_response(errors: Any) -> JsonResponse:
    """Field errors: 422 validation-failed, except a malformed UUID anywhere: 400."""
    details = errors if isinstance(errors, dict) else {"non_field_errors": errors}
    if _has_code(details, MALFORMED_UUID):
        return error_response("bad-request", "Malformed UUID.", status=400, details=_plain(details))
    return error_response(
        "validation-failed", _first_message(details), status=422, details=_plain(details)
    )


def api_exception_handler(exc: Exception, context: dict) -> HttpResponse | None:
    """DRF's EXCEPTION_HANDLER: every handled error as the envelope; None (→ a 500 through
    `config.errors.handler500`, also in the envelope) for anything unexpected."""
    if isinstance(exc, AnswerError):
        set_rollback()
        return answer_error_response(exc)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound("Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    if not isinstance(exc, exceptions.APIException):
        return None
    set_rollback()
    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(exc.wait))
    if isinstance(exc, exceptions.ValidationError):
        return validation_error_response(exc.detail)
    status = exc.status_code
    detail = exc.detail
    message = str(detail) if not isinstance(detail, (list, dict)) else _first_message(detail)
    details = _plain(detail) if isinstance(detail, (list, dict)) else {}
    return error_response(
        CODE_OF_STATUS.get(status, "bad-request" if status < 500 else "internal"),
        message,
        status=status,
        details=details,
        headers=headers,
    )


def _has_code(detail: Any, code: str) -> bool:
    if isinstance(detail, dict):
        return any(_has_code(value, code) for value in detail.values())
    if isinstance(detail, list):
        return any(_has_code(value, code) for value in detail)
    return getattr(detail, "code", None) == code


def _plain(detail: Any) -> Any:
    if isinstance(detail, dict):
        return {str(key): _plain(value) for key, value in detail.items()}
    if isinstance(detail, list):
        return [_plain(value) for value in detail]
    return str(detail)


def _first_message(detail: Any) -> str:
    if isinstance(detail, dict):
        for key, value in detail.items():
            message = _first_message(value)
            prefix = "" if key == "non_field_errors" else f"{key}: "
            return prefix + message
        return "Invalid input."
    if isinstance(detail, list):
        return _first_message(detail[0]) if detail else "Invalid input."
    return str(detail)


def is_api_request(request: HttpRequest) -> bool:
    """The request is to the API (its errors are the envelope)."""
    return request.path.startswith(API_PREFIX)
