"""Integers sent by a client (a query parameter, a form field, a WebSocket or API JSON value),
parsed by one function: `client_int`.

Python's own `int()` and `str.isdigit()` disagree on what a digit is (`"²".isdigit()` is true,
`int("²")` raises; `int("١٢")` is 12), and `int()` accepts any length of digits (an id far beyond
a database column's range fails in the query, not at the door). A client integer here is plain
ASCII: an optional `-`, the digits 0-9, at most `MAX_DIGITS` of them, optional surrounding
ASCII whitespace; or a JSON integer (never a bool, never a float). Why:
docs/decisions/0103-client-integers.md.
"""

from __future__ import annotations

import re

MAX_DIGITS = 19  # a PostgreSQL bigint has 19 digits
BIGINT_MAX = 2**63 - 1
_CLIENT_INT = re.compile(rf"[ \t\r\n]*(-?[0-9]{{1,{MAX_DIGITS}}})[ \t\r\n]*", re.ASCII)


def client_int(value: object, *, minimum: int = -BIGINT_MAX, maximum: int = BIGINT_MAX) -> int:
    """`value` (a `str` of ASCII digits, or an `int` that is not a `bool`) as an int within
    `minimum`..`maximum` (default: a PostgreSQL bigint's range).

    Raises ValueError (with a message naming the accepted form) for anything else: other types,
    Unicode digits ("²", "١"), signs other than a leading "-", decimals, empty strings, more
    than MAX_DIGITS digits, or a number outside the bounds."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"expected a whole number, not {type(value).__name__}")
    if isinstance(value, str):
        match = _CLIENT_INT.fullmatch(value)
        if match is None:
            raise ValueError("expected a whole number written with the digits 0-9")
        value = int(match.group(1))
    if not minimum <= value <= maximum:
        raise ValueError(f"expected a whole number from {minimum} to {maximum}")
    return value
