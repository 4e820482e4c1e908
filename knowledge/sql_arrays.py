"""Arrays passed to a statement as one text parameter, in PostgreSQL's array form (`{1,2,3}`),
cast in the SQL (`%s::bigint[]`, `%s::text[]`, `%s::uuid[]`).

psycopg adapts a Python list for client-side binding element by element, in Python, with a
fresh set of dumpers for each cursor (about 15 µs a list and 1 µs an element; a text element
3 µs). A question's statements pass about a dozen lists
(docs/decisions/0150-answer-cost-per-question.md, "Later (2026-11-30, morning)"); their text
form costs one join.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable


def bigint_array(values: Iterable[int]) -> str:
    """`values` (ids) as the text of a `bigint[]`. Each goes through `int()`, so only digits
    and a sign reach the text; what `int()` refuses (None, a text that is not a number) raises
    TypeError or ValueError before any SQL."""
    return "{" + ",".join([str(int(value)) for value in values]) + "}"


def text_array(values: Iterable[str]) -> str:
    """`values` as the text of a `text[]`: each element double-quoted, with its backslashes and
    double quotes escaped, so any text (commas, braces, the word NULL, spaces at either end)
    reads back as itself. A text holding a NUL character raises ValueError, as psycopg does
    for a string PostgreSQL cannot store."""
    quoted = []
    for value in values:
        text = str(value)
        if "\x00" in text:
            raise ValueError("PostgreSQL text cannot contain NUL (0x00) characters")
        quoted.append('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "{" + ",".join(quoted) + "}"


def uuid_array(values: Iterable[uuid.UUID | str]) -> str:
    """`values` as the text of a `uuid[]`. Each is read as a UUID first (ValueError if it is
    not one), so only its canonical hexadecimal form reaches the text."""
    ids = [value if isinstance(value, uuid.UUID) else uuid.UUID(str(value)) for value in values]
    return "{" + ",".join([str(value) for value in ids]) + "}"
