"""The interface of a rate-limit store, and the rules every store shares.

A store keeps, atomically whatever the concurrency, three things per key: a fixed window's
request count, the times of the last FLOOD_REQUESTS requests, and an in-flight lock (a
holder and an expiry). `chat.ratelimit` chooses one store by the settings (`store_get`) and
applies the limits with it; the stores are `PostgresStore` (`chat/ratelimit/postgres.py`)
and `RedisStore` (`chat/ratelimit/redis.py`). Every method is synchronous (database or
Redis I/O): async callers wrap it in `database_sync_to_async`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

FLOOD_REQUESTS = 5  # the requests whose average spacing the flood rule looks at


@dataclass(frozen=True)
class InFlightLock:
    """A lock held while one request runs (a conversation's one answer at a time): its key,
    who holds it (a channel name) and how long at most (a holder that dies lets it expire)."""

    key: str
    holder: str
    seconds: int


@dataclass(frozen=True)
class AdmitCounts:
    """What a store's `admit` recorded: the window's count after the request, the request
    times (None when the flood rule did not run: over the rate, or turned off) and whether
    the lock was taken."""

    count: int
    times: list[float] | None
    locked: bool


def flood_retry_after(times: list[float], *, now: float, span: float) -> int | None:
    """None when the last FLOOD_REQUESTS `times` span at least `span` seconds (or fewer were
    made), else the seconds until the next request would be admitted."""
    times = sorted(times)[-FLOOD_REQUESTS:]
    if len(times) < FLOOD_REQUESTS:
        return None
    if times[-1] - times[0] >= span:
        return None
    # The next request at T is admitted when T - times[1] >= span.
    return max(1, math.ceil(times[1] + span - now))


def flood_keep_seconds(interval: float) -> int:
    """How long a key's request times are worth keeping: past it they span more than the rule
    looks at."""
    return int(interval * FLOOD_REQUESTS) + 1


class RateLimitStore:
    """Where counts, request times and locks are kept. Subclasses implement the first four
    methods; `admit` chains them and may be overridden with one round trip."""

    def count(self, *, key: str, window_start: int, period: int) -> int:
        """Count one request of `key` in the window starting at `window_start` (`period`
        seconds long); return the window's count after it."""
        raise NotImplementedError

    def times(self, *, key: str, now: float, keep_seconds: int) -> list[float]:
        """Record a request of `key` at `now`; return the key's last FLOOD_REQUESTS request
        times, this one included (kept at least `keep_seconds`)."""
        raise NotImplementedError

    def lock_take(self, lock: InFlightLock, *, now: float) -> bool:
        """Take `lock` unless another holder has it and it has not expired."""
        raise NotImplementedError

    def lock_holder(self, key: str, *, now: float) -> str | None:
        """Who holds the lock `key` (None: nobody, or it expired)."""
        raise NotImplementedError

    def lock_release(self, lock: InFlightLock) -> None:
        """Release `lock` if `lock.holder` still holds it."""
        raise NotImplementedError

    def lock_renew(self, lock: InFlightLock, *, now: float) -> bool:
        """Extend `lock` to `lock.seconds` from now if `lock.holder` still holds it; whether
        it does."""
        raise NotImplementedError

    def admit(
        self,
        *,
        rate_key: str,
        window_start: int,
        period: int,
        limit: int,
        flood_key: str,
        now: float,
        interval: float,
        lock: InFlightLock | None,
    ) -> AdmitCounts:
        """Count the request (`count`), then, only when the count is within `limit`, record it
        for the flood rule (`times`, when `interval` > 0), then, only when that admits it too,
        take `lock` (when given)."""
        count = self.count(key=rate_key, window_start=window_start, period=period)
        if count > limit:
            return AdmitCounts(count=count, times=None, locked=False)
        times = None
        if interval > 0:
            times = self.times(key=flood_key, now=now, keep_seconds=flood_keep_seconds(interval))
            span = interval * (FLOOD_REQUESTS - 1)
            if flood_retry_after(times, now=now, span=span) is not None:
                return AdmitCounts(count=count, times=times, locked=False)
        locked = lock is not None and self.lock_take(lock, now=now)
        return AdmitCounts(count=count, times=times, locked=locked)
