"""The JSON of `GET /api/conversations/{id}/messages`, assembled from per-message pieces.

Each message is serialized by `MessageSerializer` and rendered by DRF's `JSONRenderer`, as the
whole response would be; the rendered piece is kept (per process) under the message's row,
which holds everything the piece shows (text, status, citations and whether each is stale;
for a reader an answer is withheld from, the notice instead: another key,
docs/decisions/0080-withheld-answers.md), so reloading a long conversation serializes only
what changed. Compact JSON pieces joined
with "," are byte for byte the JSON of the whole list.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.utils import timezone
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request

from chat.api import serializers as s
from chat.models import Conversation, Message
from chat.render_cache import RenderCache, row_chars
from chat.transcript import MessageRow

# Room for about 20 200-message conversations per process (docs/decisions/0046-render-cache.md).
MESSAGE_JSON_MAX_CHARS = 12_000_000
message_json = RenderCache(MESSAGE_JSON_MAX_CHARS)


def renders_compact_json(request: Request) -> bool:
    """The response negotiated for `request` is DRF's compact JSON (not the browsable API,
    not indented): what `message_list_json` writes."""
    renderer = request.accepted_renderer
    return (
        type(renderer) is JSONRenderer
        and renderer.get_indent(request.accepted_media_type, {}) is None
    )


def _message_json(row: MessageRow, renderer: JSONRenderer) -> bytes:
    return renderer.render(s.MessageSerializer(row).data)


def messages_json(rows: Sequence[MessageRow]) -> bytes:
    """The JSON list of the messages, as `MessageSerializer(rows, many=True)` renders."""
    renderer = JSONRenderer()
    zone = timezone.get_current_timezone_name()  # times are written in the current zone
    pieces = []
    for row in rows:
        if row.status == Message.Status.STREAMING:
            pieces.append(_message_json(row, renderer))
            continue
        key = (zone, row)
        piece = message_json.get(key)
        if piece is None:
            piece = _message_json(row, renderer)
            message_json.put(key, piece, len(piece) + row_chars(row))
        pieces.append(piece)
    return b"[" + b",".join(pieces) + b"]"


def message_list_json(
    conversation: Conversation, rows: Sequence[MessageRow], *, request: Request
) -> bytes:
    """The JSON of `MessageListSerializer({"conversation", "messages"})`, compact."""
    head = JSONRenderer().render(
        s.ConversationSerializer(conversation, context={"request": request}).data
    )
    return b'{"conversation":' + head + b',"messages":' + messages_json(rows) + b"}"
