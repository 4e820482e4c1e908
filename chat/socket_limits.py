"""At most settings.WS_MAX_SOCKETS_PER_USER conversation sockets per user in a web process
(docs/decisions/0148-uploads-and-sockets-with-limits.md): each socket has a thread of its own
(docs/decisions/0045-a-thread-per-socket.md), so one user opening sockets without end would
take the process's threads. A socket beyond the cap is closed with CLOSE_TOO_MANY_SOCKETS,
which the page shows as final (no reconnection)."""

from __future__ import annotations

import threading

from django.conf import settings

# Closed because the user has too many sockets open here (as HTTP's 429).
CLOSE_TOO_MANY_SOCKETS = 4429

_open: dict[int, int] = {}
_lock = threading.Lock()


def socket_admit(user_id: int) -> bool:
    """Count one more socket of `user_id`; False (and nothing counted) when they already hold
    settings.WS_MAX_SOCKETS_PER_USER in this process."""
    with _lock:
        held = _open.get(user_id, 0)
        if held >= settings.WS_MAX_SOCKETS_PER_USER:
            return False
        _open[user_id] = held + 1
        return True


def socket_release(user_id: int) -> None:
    """One socket of `user_id`, admitted by `socket_admit`, has closed."""
    with _lock:
        held = _open.get(user_id, 0) - 1
        if held > 0:
            _open[user_id] = held
        else:
            _open.pop(user_id, None)


def sockets_open(user_id: int) -> int:
    """The sockets of `user_id` admitted and not yet closed in this process."""
    with _lock:
        return _open.get(user_id, 0)
