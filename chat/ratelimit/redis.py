"""The rate-limit store with `REDIS_URL` set: counts and request times on Redis keys that
expire with what they hold (each change one MULTI/EXEC), the in-flight lock a Redis key
holding its holder's name (`SET NX EX`: taken only when absent; released by a script that
deletes it only when the releaser still holds it); see docs/decisions/0043-rate-limit-stores.md
and docs/decisions/0106-stuck-states-and-stop-frames.md."""

from __future__ import annotations

from chat.ratelimit.base import FLOOD_REQUESTS, InFlightLock, RateLimitStore

# Compare and delete in one step: a holder whose lock lapsed and was taken by another never
# frees the other's.
_RELEASE_SCRIPT = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
)
_RENEW_SCRIPT = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then "
    "return redis.call('expire', KEYS[1], ARGV[2]) end return 0"
)


def _lock_key(key: str) -> str:
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
        """`SET NX EX`: the key expires after `lock.seconds` of Redis' own clock."""
        return bool(self._client().set(_lock_key(lock.key), lock.holder, nx=True, ex=lock.seconds))

    def lock_holder(self, key: str, *, now: float) -> str | None:
        holder = self._client().get(_lock_key(key))
        return holder.decode() if isinstance(holder, bytes) else holder

    def lock_release(self, lock: InFlightLock) -> None:
        """Deleted only when `lock.holder` still holds it, in one script (atomic)."""
        self._client().eval(_RELEASE_SCRIPT, 1, _lock_key(lock.key), lock.holder)

    def lock_renew(self, lock: InFlightLock, *, now: float) -> bool:
        """Its expiry pushed back only when `lock.holder` still holds it, in one script."""
        renewed = self._client().eval(
            _RENEW_SCRIPT, 1, _lock_key(lock.key), lock.holder, lock.seconds
        )
        return bool(renewed)
