"""The long parts of the chat page, rendered apart and spliced into it: a conversation's
messages (`transcript_html`) and the settings dialog's documents (`document_options_html`),
each kept rendered in a `RenderCache`; `page_with_parts` splices them in
(docs/decisions/0046-render-cache.md)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import get_script_prefix
from django.utils import timezone
from django.utils.safestring import mark_safe

from chat.fragments import message_html
from chat.models import Message
from chat.presenters import surroundings_read, view_of_row
from chat.render_cache import RenderCache, row_chars
from chat.transcript import MessageRow

# Room for about 20 200-message conversations per process (docs/decisions/0046-render-cache.md).
RENDERED_MESSAGES_MAX_CHARS = 25_000_000
rendered_messages = RenderCache(RENDERED_MESSAGES_MAX_CHARS)


def transcript_html(
    rows: Sequence[MessageRow], *, conversation_id: uuid.UUID, user=None, can_post: bool = True
) -> bytes:
    """The messages of a conversation (`rows`, in order) as its page shows them, as UTF-8:
    each the partial of `message_html` without an out-of-band swap (see `page_with_parts`).

    `rows` are as the reader may read them (`chat.transcript.conversation_transcript`): a row
    withheld from them holds the notice, not the answer, so it is another key than the full
    row and a rendering is never served to a reader it is withheld from
    (docs/decisions/0080-withheld-answers.md).

    A message rendered before from the same inputs comes from `rendered_messages`: its row
    (text, status, citations and whether each is stale, withheld or not), the question it
    answers, the reader's rating, whether the reader may post, the state of the cited
    documents (still there, original file available), the time zone and the URL prefix.
    Reopening a long conversation renders only what changed; a streaming message is always
    rendered."""
    around = surroundings_read(rows, user, conversation_id=conversation_id)
    prefix, zone = get_script_prefix(), timezone.get_current_timezone_name()
    rendered = []
    for row in rows:
        if row.status == Message.Status.STREAMING:
            rendered.append(message_html(view_of_row(row, around, can_post=can_post)).encode())
            continue
        key = (
            prefix,
            zone,
            row,
            around.question_of(row),
            around.ratings.get(row.id),
            can_post,
            tuple(around.documents.get(c.document_id_snapshot) for c in row.citations),
        )
        html = rendered_messages.get(key)
        if html is None:
            # message_html is the autoescaped partial: its output is safe HTML.
            html = message_html(view_of_row(row, around, can_post=can_post)).encode()
            rendered_messages.put(key, html, len(html) + row_chars(row))
        rendered.append(html)
    return b"".join(rendered)


# Room for a few document lists of some thousand documents each.
DOCUMENT_OPTIONS_MAX_CHARS = 4_000_000
rendered_document_options = RenderCache(DOCUMENT_OPTIONS_MAX_CHARS)


def document_options_html(documents: Sequence[tuple[int, str]]) -> bytes:
    """The settings dialog's checkbox per document ((id, title) pairs, in order), as UTF-8,
    rendered once per distinct list: a large knowledge base has thousands of documents, the
    same on every page until one is added, renamed or disabled."""
    key = tuple(documents)
    html = rendered_document_options.get(key)
    if html is None:
        html = render_to_string(  # an autoescaped partial
            "chat/conversation.html#document-options", {"documents": key}
        ).encode()
        rendered_document_options.put(key, html, 2 * len(html))
    return html


def page_with_parts(
    request: HttpRequest, template_name: str, context: dict[str, Any], parts: dict[str, bytes]
) -> HttpResponse:
    """The page, with each of `parts` (safe HTML, UTF-8) where the template shows the
    variable of that name.

    The parts are spliced into the encoded page, not passed through the template
    (docs/decisions/0046-render-cache.md): the template sees a marker comment in their place,
    which no escaped text can contain (its "<" would be "&lt;")."""
    markers = {name: f"<!--sourced-part:{name}-->" for name in parts}
    text = render_to_string(
        template_name,
        {**context, **{name: mark_safe(marker) for name, marker in markers.items()}},
        request=request,
    )
    names = "|".join(re.escape(name) for name in parts)
    pieces = re.split(f"<!--sourced-part:({names})-->", text)  # text, name, text, …, text
    body = [piece.encode() if i % 2 == 0 else parts[piece] for i, piece in enumerate(pieces)]
    return HttpResponse(b"".join(body))
