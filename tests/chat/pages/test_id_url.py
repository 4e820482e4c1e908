"""`{% id_url %}` gives the very URL `{% url %}` gives, for UUID and integer ids, and for any
other id falls back to `{% url %}` (chat/templatetags/chat_urls.py)."""

from __future__ import annotations

import uuid

from django.template import Context, Template
from django.urls import reverse, set_script_prefix


def _render(source: str, **context) -> str:
    return Template("{% load chat_urls %}" + source).render(Context(context))


def test_the_same_url_as_reverse_for_each_kind_of_id():
    conversation = uuid.uuid4()
    assert _render("{% id_url 'chat:conversation' pk %}", pk=conversation) == reverse(
        "chat:conversation", args=[conversation]
    )
    assert _render("{% id_url 'chat:conversation_delete' pk %}", pk=conversation) == reverse(
        "chat:conversation_delete", args=[conversation]
    )
    message = uuid.uuid4()
    assert _render("{% id_url 'chat:message_feedback' pk %}", pk=str(message)) == reverse(
        "chat:message_feedback", args=[message]
    )
    other = uuid.uuid4()  # the second id of a name: from the URL reversed once
    assert _render("{% id_url 'chat:conversation' pk %}", pk=other) == reverse(
        "chat:conversation", args=[other]
    )
    assert _render("{% id_url 'knowledge:document' pk %}", pk=42) == reverse(
        "knowledge:document", args=[42]
    )


def test_the_script_prefix_is_followed():
    conversation = uuid.uuid4()
    try:
        set_script_prefix("/sourced/")
        assert _render("{% id_url 'chat:conversation' pk %}", pk=conversation).startswith(
            "/sourced/"
        )
    finally:
        set_script_prefix("/")
    assert not _render("{% id_url 'chat:conversation' pk %}", pk=conversation).startswith(
        "/sourced/"
    )
