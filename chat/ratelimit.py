"""The chat rate limit (SPEC §10): settings.CHAT_RATE_LIMIT (20/m) chat requests per user.

Counted with django-ratelimit in the shared cache (the PostgreSQL-backed cache, or Redis when
REDIS_URL is set), so every worker process sees the same counts. The API and the WebSocket
consumer both call `chat_rate_limited` once per chat request.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django_ratelimit.core import get_usage

GROUP = "chat"


def chat_rate_limited(user: AbstractBaseUser) -> int | None:
    """Count one chat request of `user`; None when allowed, else the seconds until the window
    resets (for Retry-After, at least 1). Synchronous (cache I/O): async callers wrap it in
    `database_sync_to_async`."""
    usage = get_usage(
        None,  # keyed by the user, so no request is needed
        group=GROUP,
        key=lambda group, request: str(user.pk),
        rate=settings.CHAT_RATE_LIMIT,
        increment=True,
    )
    if usage is None or not usage["should_limit"]:
        return None
    return max(1, int(usage["time_left"]))
