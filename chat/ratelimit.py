"""The rate limits (SPEC §10): settings.CHAT_RATE_LIMIT (20/m) chat requests per user, and as
many searches (`/api/search`) in a bucket of their own.

A fixed window per user and group, counted atomically so that concurrent requests are never
undercounted (django-ratelimit's database-cache `incr` reads then writes, and let through more
than the limit under concurrency):

- without Redis: one SQL upsert on PostgreSQL (`INSERT … ON CONFLICT DO UPDATE … RETURNING`)
  on the `RateLimitCounter` row of the user and group;
- with `REDIS_URL` set: Redis `INCR` and `EXPIRE` in one MULTI/EXEC, on a key per window.

Every worker process sees the same counts either way. The API and the WebSocket consumer call
`chat_rate_limited` once per chat request, the search API `search_rate_limited`.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection

from chat.models import RateLimitCounter

GROUP = "chat"
SEARCH_GROUP = "search"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smhd])\s*$")


def _now() -> float:
    """The wall clock the windows are cut from (a test may pin it)."""
    return time.time()


@dataclass(frozen=True)
class Rate:
    limit: int  # requests allowed per window
    period: int  # the window, in seconds


def rate_parse(rate: str) -> Rate:
    """django-ratelimit's notation: "20/m", "100/h", "5/10s" (5 per 10 seconds)."""
    match = _RATE.match(rate or "")
    if match is None:
        raise ValueError(f"Invalid rate {rate!r}: expected e.g. 20/m, 100/h or 5/10s.")
    count, multiplier, unit = match.groups()
    return Rate(limit=int(count), period=int(multiplier or 1) * _UNITS[unit])


def rate_limit_hit(*, group: str, user: AbstractBaseUser, rate: str) -> int | None:
    """Count one request of `user` in `group`; None when allowed, else the seconds until the
    window resets (for Retry-After, at least 1). Synchronous (database or Redis I/O): async
    callers wrap it in `database_sync_to_async`."""
    parsed = rate_parse(rate)
    now = _now()
    window_start = int(now // parsed.period) * parsed.period
    key = f"{group}:{user.pk}"
    if settings.REDIS_URL:
        count = _count_redis(key=key, window_start=window_start, period=parsed.period)
    else:
        count = _count_postgres(key=key, window_start=window_start)
    if count <= parsed.limit:
        return None
    return max(1, math.ceil(window_start + parsed.period - now))


def chat_rate_limited(user: AbstractBaseUser) -> int | None:
    """Count one chat request of `user` (see `rate_limit_hit`)."""
    return rate_limit_hit(group=GROUP, user=user, rate=settings.CHAT_RATE_LIMIT)


def search_rate_limited(user: AbstractBaseUser) -> int | None:
    """Count one search of `user`, at the chat's rate, in a bucket of its own."""
    return rate_limit_hit(group=SEARCH_GROUP, user=user, rate=settings.CHAT_RATE_LIMIT)


def _count_postgres(*, key: str, window_start: int) -> int:
    """The window's count after this request, in one statement: the row of the key is
    created, incremented, or reset when its window has passed (a request of an older
    window, delayed, still counts in the newer one)."""
    table = connection.ops.quote_name(RateLimitCounter._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (key, window_start, count) VALUES (%s, %s, 1) "
            f"ON CONFLICT (key) DO UPDATE SET "
            f"count = CASE WHEN {table}.window_start >= EXCLUDED.window_start "
            f"THEN {table}.count + 1 ELSE 1 END, "
            f"window_start = GREATEST({table}.window_start, EXCLUDED.window_start) "
            f"RETURNING count",
            [key, window_start],
        )
        (count,) = cursor.fetchone()
    return int(count)


def _count_redis(*, key: str, window_start: int, period: int) -> int:
    """The window's count after this request: INCR on the window's own key, which expires
    with the window (both in one MULTI/EXEC, so a key never outlives its window)."""
    from django_redis import get_redis_connection

    client = get_redis_connection("default")
    redis_key = f"sourced:ratelimit:{key}:{window_start}"
    pipeline = client.pipeline(transaction=True)
    pipeline.incr(redis_key)
    pipeline.expire(redis_key, period + 1)
    count, _ = pipeline.execute()
    return int(count)
