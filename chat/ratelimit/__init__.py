"""The rate limits (SPEC §10): settings.CHAT_RATE_LIMIT (20/m) chat requests per user, and as
many searches (`/api/search`) in a bucket of their own.

A fixed window per user and group, counted atomically so that concurrent requests are never
undercounted (django-ratelimit's database-cache `incr` reads then writes, and let through more
than the limit under concurrency):

- without Redis: one SQL upsert on PostgreSQL (`INSERT … ON CONFLICT DO UPDATE … RETURNING`)
  on the `RateLimitCounter` row of the user and group;
- with `REDIS_URL` set: Redis `INCR` and `EXPIRE` in one MULTI/EXEC, on a key per window.

Every worker process sees the same counts either way. The search API calls
`search_rate_limited` once per search.

**Flood protection** (seed 004): besides the rate, a user whose last FLOOD_REQUESTS chat
requests came less than settings.CHAT_FLOOD_MIN_INTERVAL seconds (2) apart on average is
turned away for a moment, however few requests the window has counted: a stuck key, a script.
The times of each user's last requests are kept atomically in the same place as the counts (one
upsert on an array, or RPUSH + LTRIM in one MULTI/EXEC). The API and the WebSocket consumer
call `chat_throttled` once per chat request: the rate, then the flood rule; the WebSocket
consumer calls `chat_admit`, which also takes the conversation's in-flight lock (one answer at
a time) when the request is admitted — without Redis all three in one SQL statement.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.cache import cache
from django.db import connection

from chat.models import InFlightLockRow, RateLimitCounter, RequestTimes

GROUP = "chat"
SEARCH_GROUP = "search"
FLOOD_GROUP = "flood"
FLOOD_REQUESTS = 5  # the requests whose average spacing the flood rule looks at
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


@dataclass(frozen=True)
class Throttled:
    """A chat request turned away: wait `retry_after` seconds; `flood`: for asking too fast
    in a row rather than too many in the window."""

    retry_after: int
    flood: bool = False


def chat_throttled(user: AbstractBaseUser) -> Throttled | None:
    """Count one chat request of `user`: None when it may go ahead, else why not (the rate
    limit, or the flood rule). Synchronous, like `rate_limit_hit`."""
    return chat_admit(user).throttled


@dataclass(frozen=True)
class InFlightLock:
    """A lock held while one request runs (a conversation's one answer at a time): its key,
    who holds it (a channel name) and how long at most (a holder that dies lets it expire)."""

    key: str
    holder: str
    seconds: int


@dataclass(frozen=True)
class Admission:
    throttled: Throttled | None = None  # refused by the rate limit or the flood rule
    locked: bool = False  # the lock asked for was taken


def chat_admit(user: AbstractBaseUser, *, lock: InFlightLock | None = None) -> Admission:
    """Count one chat request of `user` (the rate, then the flood rule) and, when it may go
    ahead and `lock` is given, take the lock unless another holder has it (and it has not
    expired). Without Redis this is one SQL statement for all three (`_admit_postgres`); with
    Redis the counts are kept in Redis and the lock is the shared cache's `add`."""
    if settings.REDIS_URL:
        retry_after = chat_rate_limited(user)
        if retry_after is not None:
            return Admission(throttled=Throttled(retry_after=retry_after))
        retry_after = flood_hit(user)
        if retry_after is not None:
            return Admission(throttled=Throttled(retry_after=retry_after, flood=True))
        if lock is None:
            return Admission()
        return Admission(locked=cache.add(_cache_key(lock.key), lock.holder, lock.seconds))
    return _admit_postgres(user, lock)


def in_flight_holder(key: str) -> str | None:
    """Who holds the lock `key` now (None: nobody, or it expired)."""
    if settings.REDIS_URL:
        holder = cache.get(_cache_key(key))
        return holder if isinstance(holder, str) else None
    table = connection.ops.quote_name(InFlightLockRow._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT holder FROM {table} WHERE key = %s AND expires_at > %s", [key, _now()]
        )
        row = cursor.fetchone()
    return row[0] if row else None


def in_flight_release(lock: InFlightLock) -> None:
    """Release the lock (only if still held by `lock.holder`, without Redis; with it, as the
    cache's `delete`)."""
    if settings.REDIS_URL:
        cache.delete(_cache_key(lock.key))
        return
    table = connection.ops.quote_name(InFlightLockRow._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"DELETE FROM {table} WHERE key = %s AND holder = %s", [lock.key, lock.holder]
        )


def _cache_key(key: str) -> str:
    return f"sourced:chat:in-flight:{key}"


def _admit_postgres(user: AbstractBaseUser, lock: InFlightLock | None) -> Admission:
    """`chat_admit` in one statement: the rate's upsert (`_count_sql`), the flood rule's
    (`_times_sql`) only when the rate admits the request, the lock's upsert only
    when the flood rule admits it too (the same test as `flood_hit`, in SQL)."""
    rate = rate_parse(settings.CHAT_RATE_LIMIT)
    interval = float(settings.CHAT_FLOOD_MIN_INTERVAL)
    now = _now()
    window_start = int(now // rate.period) * rate.period
    locks = connection.ops.quote_name(InFlightLockRow._meta.db_table)
    times_row = "SELECT %s, ARRAY[%s]::double precision[] FROM rate WHERE rate.count <= %s AND %s"
    sql = (
        f"WITH rate AS ({_count_sql()}), "
        f"flood AS ({_times_sql(times_row)}), "
        f"taken AS ("
        f"INSERT INTO {locks} (key, holder, expires_at) "
        f"SELECT %s, %s, %s FROM rate WHERE %s AND rate.count <= %s AND NOT EXISTS ("
        f"SELECT 1 FROM flood WHERE cardinality(flood.times) >= %s "
        f"AND (SELECT max(t) - min(t) FROM unnest(flood.times) AS t) < %s) "
        f"ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, "
        f"expires_at = EXCLUDED.expires_at WHERE {locks}.expires_at <= %s "
        f"RETURNING 1) "
        f"SELECT (SELECT count FROM rate), (SELECT times FROM flood), "
        f"EXISTS (SELECT 1 FROM taken)"
    )
    span = interval * (FLOOD_REQUESTS - 1)
    params = [
        f"{GROUP}:{user.pk}", window_start,
        f"{FLOOD_GROUP}:{user.pk}", now, rate.limit, interval > 0, FLOOD_REQUESTS,
        lock.key if lock else "", lock.holder if lock else "",
        now + (lock.seconds if lock else 0), lock is not None, rate.limit,
        FLOOD_REQUESTS, span, now,
    ]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        count, recent, locked = cursor.fetchone()
    if count > rate.limit:
        retry_after = max(1, math.ceil(window_start + rate.period - now))
        return Admission(throttled=Throttled(retry_after=retry_after))
    if recent is not None:
        retry_after = _flood_retry_after([float(t) for t in recent], now=now, span=span)
        if retry_after is not None:
            return Admission(throttled=Throttled(retry_after=retry_after, flood=True))
    return Admission(locked=bool(locked))


def flood_hit(user: AbstractBaseUser) -> int | None:
    """Record one chat request of `user` now; None when the user's last FLOOD_REQUESTS
    requests (this one included) are on average at least settings.CHAT_FLOOD_MIN_INTERVAL
    seconds apart (or fewer were made), else the seconds until the next one would be."""
    interval = float(settings.CHAT_FLOOD_MIN_INTERVAL)
    if interval <= 0:
        return None
    now = _now()
    key = f"{FLOOD_GROUP}:{user.pk}"
    if settings.REDIS_URL:
        times = _times_redis(key=key, now=now, keep_seconds=int(interval * FLOOD_REQUESTS) + 1)
    else:
        times = _times_postgres(key=key, now=now)
    return _flood_retry_after(times, now=now, span=interval * (FLOOD_REQUESTS - 1))


def _flood_retry_after(times: list[float], *, now: float, span: float) -> int | None:
    """None when the last FLOOD_REQUESTS `times` span at least `span` seconds (or fewer were
    made), else the seconds until the next request would be admitted."""
    times = sorted(times)[-FLOOD_REQUESTS:]
    if len(times) < FLOOD_REQUESTS:
        return None
    if times[-1] - times[0] >= span:
        return None
    # The next request at T is admitted when T - times[1] >= span.
    return max(1, math.ceil(times[1] + span - now))


def search_rate_limited(user: AbstractBaseUser) -> int | None:
    """Count one search of `user`, at the chat's rate, in a bucket of its own."""
    return rate_limit_hit(group=SEARCH_GROUP, user=user, rate=settings.CHAT_RATE_LIMIT)


def _count_sql() -> str:
    """The rate's upsert (parameters: key, window start), returning the window's count after
    this request: the row of the key is created, incremented, or reset when its window has
    passed (a request of an older window, delayed, still counts in the newer one). Run alone
    by `_count_postgres`, and as the first step of `_admit_postgres`."""
    table = connection.ops.quote_name(RateLimitCounter._meta.db_table)
    return (
        f"INSERT INTO {table} (key, window_start, count) VALUES (%s, %s, 1) "
        f"ON CONFLICT (key) DO UPDATE SET "
        f"count = CASE WHEN {table}.window_start >= EXCLUDED.window_start "
        f"THEN {table}.count + 1 ELSE 1 END, "
        f"window_start = GREATEST({table}.window_start, EXCLUDED.window_start) "
        f"RETURNING count"
    )


def _count_postgres(*, key: str, window_start: int) -> int:
    """The window's count after this request, in one statement (`_count_sql`)."""
    with connection.cursor() as cursor:
        cursor.execute(_count_sql(), [key, window_start])
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


def _times_sql(row: str) -> str:
    """The flood rule's upsert of the `row` (a VALUES list or a SELECT giving the key and a
    one-time array, then the parameter FLOOD_REQUESTS): the key's last FLOOD_REQUESTS request
    times, this one appended, returned as `times`. Run alone by `_times_postgres`, and as the
    second step of `_admit_postgres`."""
    table = connection.ops.quote_name(RequestTimes._meta.db_table)
    return (
        f"INSERT INTO {table} (key, times) {row} "
        f"ON CONFLICT (key) DO UPDATE SET times = ({table}.times || EXCLUDED.times)"
        f"[GREATEST(1, cardinality({table}.times) + 2 - %s):] "
        f"RETURNING times"
    )


def _times_postgres(*, key: str, now: float) -> list[float]:
    """The key's last FLOOD_REQUESTS request times, this one appended, in one statement."""
    with connection.cursor() as cursor:
        cursor.execute(
            _times_sql("VALUES (%s, ARRAY[%s]::double precision[])"), [key, now, FLOOD_REQUESTS]
        )
        (times,) = cursor.fetchone()
    return [float(t) for t in times]


def _times_redis(*, key: str, now: float, keep_seconds: int) -> list[float]:
    """The key's last FLOOD_REQUESTS request times, this one appended (RPUSH, LTRIM, LRANGE
    and EXPIRE in one MULTI/EXEC)."""
    from django_redis import get_redis_connection

    client = get_redis_connection("default")
    redis_key = f"sourced:flood:{key}"
    pipeline = client.pipeline(transaction=True)
    pipeline.rpush(redis_key, repr(now))
    pipeline.ltrim(redis_key, -FLOOD_REQUESTS, -1)
    pipeline.lrange(redis_key, 0, -1)
    pipeline.expire(redis_key, keep_seconds)
    _, _, times, _ = pipeline.execute()
    return [float(t) for t in times]
