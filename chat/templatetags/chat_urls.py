"""`{% id_url "name" pk %}`: `{% url "name" pk %}` for a URL whose one argument is an object's id
(a UUID or an integer), without resolving the URL pattern again for every object: the URL is
reversed once per name, kind of id and script prefix with a placeholder id, and the id put in
its place (a sidebar of 30 conversations reversed 90 URLs per render;
docs/decisions/0150-answer-cost-per-question.md). `id_url` is also called as a function where
a URL is built per source or citation (the presenters, `chat.citations.document_link`,
`chat.clients.answers.passage_link`; 0181)."""

from __future__ import annotations

import functools
import uuid

from django import template
from django.urls import get_script_prefix, reverse

register = template.Library()

_PLACEHOLDERS: dict[str, object] = {
    "uuid": uuid.UUID("0f0e0d0c-0b0a-4908-8706-050403020100"),
    "int": 9_876_543_210_123,
}


@functools.lru_cache(maxsize=256)
def _reversed(name: str, kind: str, prefix: str) -> tuple[str, str]:
    """(the URL of `name` for the placeholder id of `kind`, the placeholder as it appears)."""
    placeholder = _PLACEHOLDERS[kind]
    return reverse(name, args=[placeholder]), str(placeholder)


@register.simple_tag
def id_url(name: str, pk: object) -> str:
    """The URL `name` of the object whose id is `pk` (as `{% url name pk %}`); `pk` may also
    be the text of a UUID or an integer in its one canonical form (a view's id)."""
    kind = _kind(pk)
    if kind is None:
        return reverse(name, args=[pk])
    url, placeholder = _reversed(name, kind, get_script_prefix())
    if url.count(placeholder) != 1:
        return reverse(name, args=[pk])
    return url.replace(placeholder, str(pk))


def _kind(pk: object) -> str | None:
    """Which placeholder stands for `pk`: "uuid" or "int", for an id or its canonical text
    (the text reverse would put in the URL is then the text itself); None for anything else."""
    if isinstance(pk, uuid.UUID):
        return "uuid"
    if isinstance(pk, int) and not isinstance(pk, bool):
        return "int"
    if isinstance(pk, str):
        if pk.isascii() and pk.isdigit() and str(int(pk)) == pk:
            return "int"
        try:
            canonical = str(uuid.UUID(pk))
        except ValueError:
            return None
        return "uuid" if canonical == pk else None
    return None
