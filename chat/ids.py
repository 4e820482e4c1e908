"""Ids sent by clients (a message id, a conversation id in a path or a body): parsed one way
by every transport."""

from __future__ import annotations

import re
import uuid

from chat.errors import AnswerError

# The form the schema's "uuid" format names: 8-4-4-4-12 hexadecimal digits (either case).
_CANONICAL = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)


def uuid_parse(value: object, name: str) -> uuid.UUID:
    """`value` (a UUID, or its canonical text: 8-4-4-4-12 hexadecimal digits) as a UUID.

    Raises AnswerError: bad-request (400), details `{name: ["Must be a valid UUID."]}`, when it
    is missing or malformed.
    """
    if isinstance(value, uuid.UUID):
        return value
    try:
        if not isinstance(value, str) or not _CANONICAL.fullmatch(value):
            raise ValueError(value)
        return uuid.UUID(value)
    except (TypeError, ValueError, AttributeError):
        raise AnswerError.bad_request(
            f"{name} is not a valid UUID.", details={name: ["Must be a valid UUID."]}
        ) from None
