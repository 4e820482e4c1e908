"""The rate limits (docs/product.md §10): settings.CHAT_RATE_LIMIT (20/m) chat requests per
user, and as many searches (`/api/search`) in a bucket of their own; and the flood rule:
a user whose last FLOOD_REQUESTS chat requests came less than
settings.CHAT_FLOOD_MIN_INTERVAL seconds (2) apart on average is turned away for a moment,
however few requests the window has counted.

Counts are per user and group in a fixed window, kept atomically by one store shared by
every worker process (`store_get`: Redis with `REDIS_URL` set, else PostgreSQL; see
chat/ratelimit/base.py and docs/decisions/0043-rate-limit-stores.md). The search API calls
`search_rate_limited` once per search; the chat API `chat_throttled` once per request (the
rate, then the flood rule); the WebSocket consumer `chat_admit`, which also takes the
conversation's in-flight lock (one answer at a time) when the request is admitted.

Every function is synchronous (database or Redis I/O): async callers wrap it in
`database_sync_to_async`.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
import time
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.signals import setting_changed
from django.dispatch import receiver

from chat.ratelimit.base import (
    FLOOD_REQUESTS,
    InFlightLock,
    RateLimitStore,
    flood_keep_seconds,
    flood_retry_after,
)

__all__ = [
    "FLOOD_REQUESTS",
    "Admission",
    "InFlightLock",
    "Rate",
    "Throttled",
    "chat_admit",
    "chat_rate_limited",
    "chat_throttled",
    "flood_hit",
    "in_flight_holder",
    "in_flight_release",
    "in_flight_renew",
    "rate_limit_hit",
    "rate_parse",
    "search_rate_limited",
    "store_get",
    "throttled_message",
]

logger = logging.getLogger("sourced.ratelimit")

GROUP = "chat"
SEARCH_GROUP = "search"
FLOOD_GROUP = "flood"
FILES_GROUP = "files"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([smhd])\s*$")


def _now() -> float:
    """The wall clock the windows are cut from (a test may pin it)."""
    return time.time()


@functools.cache
def store_get() -> RateLimitStore:
    """The store of this process, chosen once from the settings: Redis when `REDIS_URL` is
    set, else PostgreSQL (chosen again when a test changes the setting)."""
    if settings.REDIS_URL:
        from chat.ratelimit.redis import RedisStore

        return RedisStore()
    from chat.ratelimit.postgres import PostgresStore

    return PostgresStore()


@receiver(setting_changed)
def _store_reset(*, setting: str, **kwargs) -> None:
    if setting in {"REDIS_URL", "CACHES"}:
        store_get.cache_clear()


@dataclass(frozen=True)
class Rate:
    limit: int  # requests allowed per window
    period: int  # the window, in seconds

    def window_start(self, now: float) -> int:
        return int(now // self.period) * self.period

    def retry_after(self, now: float) -> int:
        """Seconds until the window of `now` ends (at least 1)."""
        return max(1, math.ceil(self.window_start(now) + self.period - now))


def rate_parse(rate: str) -> Rate:
    """django-ratelimit's notation: "20/m", "100/h", "5/10s" (5 per 10 seconds)."""
    match = _RATE.match(rate or "")
    if match is None:
        raise ValueError(f"Invalid rate {rate!r}: expected e.g. 20/m, 100/h or 5/10s.")
    count, multiplier, unit = match.groups()
    return Rate(limit=int(count), period=int(multiplier or 1) * _UNITS[unit])


def rate_limit_hit(*, group: str, user: AbstractBaseUser, rate: str) -> int | None:
    """Count one request of `user` in `group`; None when allowed, else the seconds until the
    window resets (for Retry-After, at least 1)."""
    parsed = rate_parse(rate)
    now = _now()
    count = store_get().count(
        key=f"{group}:{user.pk}", window_start=parsed.window_start(now), period=parsed.period
    )
    if count <= parsed.limit:
        return None
    retry_after = parsed.retry_after(now)
    refusal_log(group=group, user=user, retry_after=retry_after, reason="rate")
    return retry_after


def refusal_log(*, group: str, user: AbstractBaseUser, retry_after: int, reason: str) -> None:
    """One structured line on the `sourced.ratelimit` logger per request turned away: the
    bucket, the user's id, why ("rate" or "flood") and the wait; no request content."""
    record = {
        "event": "chat.rate_limit",
        "group": group,
        "user": user.pk,
        "reason": reason,
        "retry_after": retry_after,
    }
    logger.info(json.dumps(record, sort_keys=True))


def chat_rate_limited(user: AbstractBaseUser) -> int | None:
    """Count one chat request of `user` (see `rate_limit_hit`)."""
    return rate_limit_hit(group=GROUP, user=user, rate=settings.CHAT_RATE_LIMIT)


def search_rate_limited(user: AbstractBaseUser) -> int | None:
    """Count one search of `user`, at the chat's rate, in a bucket of its own."""
    return rate_limit_hit(group=SEARCH_GROUP, user=user, rate=settings.CHAT_RATE_LIMIT)


def files_upload_rate_limited(user: AbstractBaseUser) -> int | None:
    """Count one personal file upload of `user` (settings.FILES_UPLOAD_RATE_LIMIT), in a
    bucket of its own."""
    return rate_limit_hit(group=FILES_GROUP, user=user, rate=settings.FILES_UPLOAD_RATE_LIMIT)


def flood_hit(user: AbstractBaseUser) -> int | None:
    """Record one chat request of `user` now; None when the user's last FLOOD_REQUESTS
    requests (this one included) are on average at least settings.CHAT_FLOOD_MIN_INTERVAL
    seconds apart (or fewer were made), else the seconds until the next one would be."""
    interval = float(settings.CHAT_FLOOD_MIN_INTERVAL)
    if interval <= 0:
        return None
    now = _now()
    times = store_get().times(
        key=f"{FLOOD_GROUP}:{user.pk}", now=now, keep_seconds=flood_keep_seconds(interval)
    )
    return flood_retry_after(times, now=now, span=interval * (FLOOD_REQUESTS - 1))


@dataclass(frozen=True)
class Throttled:
    """A chat request turned away: wait `retry_after` seconds; `flood`: for asking too fast
    in a row rather than too many in the window."""

    retry_after: int
    flood: bool = False


def throttled_message(throttled: Throttled) -> str:
    """What a user turned away is told, on every transport."""
    wait = throttled.retry_after
    reason = (
        "Questions are coming very fast"
        if throttled.flood
        else "You are asking questions faster than the limit allows"
    )
    return f"{reason}. Please wait {wait} second{'s' if wait != 1 else ''}, then try again."


@dataclass(frozen=True)
class Admission:
    throttled: Throttled | None = None  # refused by the rate limit or the flood rule
    locked: bool = False  # the lock asked for was taken


def chat_admit(user: AbstractBaseUser, *, lock: InFlightLock | None = None) -> Admission:
    """Count one chat request of `user` (the rate, then the flood rule) and, when it may go
    ahead and `lock` is given, take the lock unless another holder has it (and it has not
    expired): the store's `admit` (one SQL statement on PostgreSQL)."""
    rate = rate_parse(settings.CHAT_RATE_LIMIT)
    interval = float(settings.CHAT_FLOOD_MIN_INTERVAL)
    now = _now()
    counts = store_get().admit(
        rate_key=f"{GROUP}:{user.pk}",
        window_start=rate.window_start(now),
        period=rate.period,
        limit=rate.limit,
        flood_key=f"{FLOOD_GROUP}:{user.pk}",
        now=now,
        interval=interval,
        lock=lock,
    )
    if counts.count > rate.limit:
        retry_after = rate.retry_after(now)
        refusal_log(group=GROUP, user=user, retry_after=retry_after, reason="rate")
        return Admission(throttled=Throttled(retry_after=retry_after))
    if counts.times is not None:
        span = interval * (FLOOD_REQUESTS - 1)
        retry_after = flood_retry_after(counts.times, now=now, span=span)
        if retry_after is not None:
            refusal_log(group=GROUP, user=user, retry_after=retry_after, reason="flood")
            return Admission(throttled=Throttled(retry_after=retry_after, flood=True))
    return Admission(locked=counts.locked)


def chat_throttled(user: AbstractBaseUser) -> Throttled | None:
    """Count one chat request of `user`: None when it may go ahead, else why not (the rate
    limit, or the flood rule)."""
    return chat_admit(user).throttled


def in_flight_holder(key: str) -> str | None:
    """Who holds the lock `key` now (None: nobody, or it expired)."""
    return store_get().lock_holder(key, now=_now())


def in_flight_release(lock: InFlightLock) -> None:
    """Release the lock, if `lock.holder` still holds it."""
    store_get().lock_release(lock)


def in_flight_renew(lock: InFlightLock) -> bool:
    """Extend the lock to `lock.seconds` from now, if `lock.holder` still holds it."""
    return store_get().lock_renew(lock, now=_now())
