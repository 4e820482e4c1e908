"""Rendered output kept in this process, least recently used dropped first: a long
conversation's messages as HTML (`chat.page_parts`) and as JSON (`chat.api.transcript`), the
settings dialog's document list. Why, and its bounds: docs/decisions/0046-render-cache.md."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

from chat.transcript import MessageRow


class RenderCache:
    """Rendered output kept in this process by the values it was rendered from, least
    recently used dropped first, at most `max_chars` characters (output and key text) in all.

    Keys must hold every input of the rendering, so that a hit is exactly what rendering
    would produce now: a changed input is simply another key."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Any | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, value: Any, chars: int) -> None:
        if chars > self.max_chars:
            return
        with self._lock:
            previous = self._entries.pop(key, None)
            if previous is not None:
                self._chars -= previous[1]
            self._entries[key] = (value, chars)
            self._chars += chars
            while self._chars > self.max_chars:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._chars -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._chars = 0


def row_chars(row: MessageRow) -> int:
    """About how many characters a row holds (for RenderCache's bound)."""
    return len(row.content) + sum(len(c.text) + len(c.document_title) for c in row.citations)
