"""The rate-limit store with `REDIS_URL` set: counts and request times on Redis keys that
expire with what they hold (each change one MULTI/EXEC), the in-flight lock in the shared
cache (`add`: taken only when absent); see docs/decisions/0043-rate-limit-stores.md."""

from __future__ import annotations

from django.core.cache import cache

from chat.ratelimit.base import FLOOD_REQUESTS, InFlightLock, RateLimitStore


def _cache_key(key: str) -> str:
    return f"sourced:chat:in-flight:{key}"


class RedisStore(RateLimitStore):
    @staticmethod
    def _client():
        from django_redis import get_redis_connection

        return get_redis_connection("default")

    def count(self, *, key: str, window_start: int, period: int) -> int:
        """INCR on the window's own key, which expires with the window (both in one
        MULTI/EXEC, so a key never outlives its window)."""
        redis_key = f"sourced:ratelimit:{key}:{window_start}"
        pipeline = self._client().pipeline(transaction=True)
        pipeline.incr(redis_key)
        pipeline.expire(redis_key, period + 1)
        count, _ = pipeline.execute()
        return int(count)

    def times(self, *, key: str, now: float, keep_seconds: int) -> list[float]:
        """RPUSH, LTRIM, LRANGE and EXPIRE in one MULTI/EXEC."""
        redis_key = f"sourced:flood:{key}"
        pipeline = self._client().pipeline(transaction=True)
        pipeline.rpush(redis_key, repr(now))
        pipeline.ltrim(redis_key, -FLOOD_REQUESTS, -1)
        pipeline.lrange(redis_key, 0, -1)
        pipeline.expire(redis_key, keep_seconds)
        _, _, times, _ = pipeline.execute()
        return [float(t) for t in times]

    def lock_take(self, lock: InFlightLock, *, now: float) -> bool:
        """The cache's `add`: the key expires after `lock.seconds` of Redis' own clock."""
        return cache.add(_cache_key(lock.key), lock.holder, lock.seconds)

    def lock_holder(self, key: str, *, now: float) -> str | None:
        holder = cache.get(_cache_key(key))
        return holder if isinstance(holder, str) else None

    def lock_release(self, lock: InFlightLock) -> None:
        """Deleted only when `lock.holder` still holds it (a get, then a delete)."""
        if self.lock_holder(lock.key, now=0.0) == lock.holder:
            cache.delete(_cache_key(lock.key))
