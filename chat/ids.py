"""Ids sent by clients (a message id, a conversation id in a path or a body): parsed one way
by every transport."""

from __future__ import annotations

import uuid

from chat.answering.errors import AnswerError


def uuid_parse(value: object, name: str) -> uuid.UUID:
    """`value` (a UUID, or its text in any form `uuid.UUID` reads) as a UUID.

    Raises AnswerError: bad-request (400), details `{name: ["Must be a valid UUID."]}`, when it
    is missing or malformed.
    """
    if isinstance(value, uuid.UUID):
        return value
    try:
        return uuid.UUID(str(value))
    except (TypeError, ValueError, AttributeError):
        raise AnswerError.bad_request(
            f"{name} is not a valid UUID.", details={name: ["Must be a valid UUID."]}
        ) from None
