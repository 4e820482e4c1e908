"""The typed error of the chat core, raised before an answer starts (bad input, access).

Every transport maps it: the API to the error envelope `{"error": {code, message, details}}`
with `status`, the WebSocket consumer to an error message. Codes and statuses are those of
`docs/product.md §6`.
"""

from __future__ import annotations

from typing import Any

STATUS_OF_CODE: dict[str, int] = {
    "bad-request": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not-found": 404,
    "conflict": 409,
    "validation-failed": 422,
    "rate-limited": 429,
    "internal": 500,
    "upstream-unavailable": 503,
}


class AnswerError(Exception):
    """A chat request that cannot be served, with the code and HTTP status that say why."""

    def __init__(
        self, code: str, message: str, *, status: int | None = None, details: Any = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status or STATUS_OF_CODE.get(code, 400)
        self.details = details if details is not None else {}

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}

    @classmethod
    def bad_request(cls, message: str, details: Any = None) -> AnswerError:
        return cls("bad-request", message, details=details)

    @classmethod
    def validation(cls, field: str, message: str) -> AnswerError:
        return cls("validation-failed", message, details={field: [message]})

    @classmethod
    def forbidden(cls, message: str) -> AnswerError:
        return cls("forbidden", message)

    @classmethod
    def not_found(cls, message: str) -> AnswerError:
        return cls("not-found", message)

    @classmethod
    def conflict(cls, message: str, details: Any = None) -> AnswerError:
        return cls("conflict", message, details=details)

    def __repr__(self) -> str:
        return f"AnswerError({self.code!r}, {self.message!r}, status={self.status})"
