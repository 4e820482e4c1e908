"""The rate-limit store without Redis: PostgreSQL rows (`RateLimitCounter`, `RequestTimes`,
`InFlightLockRow`), each change one upsert, and a chat request's whole admission one
statement (`PostgresStore.admit`); see docs/decisions/0043-rate-limit-stores.md."""

from __future__ import annotations

from django.db import connection

from chat.models import InFlightLockRow, RateLimitCounter, RequestTimes
from chat.ratelimit.base import FLOOD_REQUESTS, AdmitCounts, InFlightLock, RateLimitStore


def _count_sql() -> str:
    """The rate's upsert (parameters: key, window start), returning the window's count after
    this request: the row of the key is created, incremented, or reset when its window has
    passed (a request of an older window, delayed, still counts in the newer one). Run alone
    by `PostgresStore.count`, and as the first step of `PostgresStore.admit`."""
    table = connection.ops.quote_name(RateLimitCounter._meta.db_table)
    return (
        f"INSERT INTO {table} (key, window_start, count) VALUES (%s, %s, 1) "
        f"ON CONFLICT (key) DO UPDATE SET "
        f"count = CASE WHEN {table}.window_start >= EXCLUDED.window_start "
        f"THEN {table}.count + 1 ELSE 1 END, "
        f"window_start = GREATEST({table}.window_start, EXCLUDED.window_start) "
        f"RETURNING count"
    )


def _times_sql(row: str) -> str:
    """The flood rule's upsert of the `row` (a VALUES list or a SELECT giving the key and a
    one-time array, then the parameter FLOOD_REQUESTS): the key's last FLOOD_REQUESTS request
    times, this one appended, returned as `times`. Run alone by `PostgresStore.times`, and as
    the second step of `PostgresStore.admit`."""
    table = connection.ops.quote_name(RequestTimes._meta.db_table)
    return (
        f"INSERT INTO {table} (key, times) {row} "
        f"ON CONFLICT (key) DO UPDATE SET times = ({table}.times || EXCLUDED.times)"
        f"[GREATEST(1, cardinality({table}.times) + 2 - %s):] "
        f"RETURNING times"
    )


def _lock_sql(row: str) -> str:
    """The lock's upsert of the `row` (key, holder, expiry; then the parameter now): taken
    when free or expired, returning 1 when it was."""
    table = connection.ops.quote_name(InFlightLockRow._meta.db_table)
    return (
        f"INSERT INTO {table} (key, holder, expires_at) {row} "
        f"ON CONFLICT (key) DO UPDATE SET holder = EXCLUDED.holder, "
        f"expires_at = EXCLUDED.expires_at WHERE {table}.expires_at <= %s "
        f"RETURNING 1"
    )


class PostgresStore(RateLimitStore):
    def count(self, *, key: str, window_start: int, period: int) -> int:
        with connection.cursor() as cursor:
            cursor.execute(_count_sql(), [key, window_start])
            (count,) = cursor.fetchone()
        return int(count)

    def times(self, *, key: str, now: float, keep_seconds: int) -> list[float]:
        """The row keeps the last FLOOD_REQUESTS times whatever `keep_seconds`."""
        with connection.cursor() as cursor:
            cursor.execute(
                _times_sql("VALUES (%s, ARRAY[%s]::double precision[])"),
                [key, now, FLOOD_REQUESTS],
            )
            (times,) = cursor.fetchone()
        return [float(t) for t in times]

    def lock_take(self, lock: InFlightLock, *, now: float) -> bool:
        with connection.cursor() as cursor:
            cursor.execute(
                _lock_sql("VALUES (%s, %s, %s)"), [lock.key, lock.holder, now + lock.seconds, now]
            )
            return cursor.fetchone() is not None

    def lock_holder(self, key: str, *, now: float) -> str | None:
        table = connection.ops.quote_name(InFlightLockRow._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT holder FROM {table} WHERE key = %s AND expires_at > %s", [key, now]
            )
            row = cursor.fetchone()
        return row[0] if row else None

    def lock_release(self, lock: InFlightLock) -> None:
        table = connection.ops.quote_name(InFlightLockRow._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {table} WHERE key = %s AND holder = %s", [lock.key, lock.holder]
            )

    def lock_renew(self, lock: InFlightLock, *, now: float) -> bool:
        table = connection.ops.quote_name(InFlightLockRow._meta.db_table)
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE {table} SET expires_at = %s WHERE key = %s AND holder = %s",
                [now + lock.seconds, lock.key, lock.holder],
            )
            return cursor.rowcount > 0

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
        """The base `admit` in one statement: the rate's upsert (`_count_sql`), the flood
        rule's (`_times_sql`) only when the rate admits the request, the lock's upsert
        (`_lock_sql`) only when the flood rule admits it too (the test of
        `flood_retry_after`, in SQL)."""
        times_row = (
            "SELECT %s, ARRAY[%s]::double precision[] FROM rate WHERE rate.count <= %s AND %s"
        )
        lock_row = (
            "SELECT %s, %s, %s FROM rate WHERE %s AND rate.count <= %s AND NOT EXISTS ("
            "SELECT 1 FROM flood WHERE cardinality(flood.times) >= %s "
            "AND (SELECT max(t) - min(t) FROM unnest(flood.times) AS t) < %s)"
        )
        sql = (
            f"WITH rate AS ({_count_sql()}), "
            f"flood AS ({_times_sql(times_row)}), "
            f"taken AS ({_lock_sql(lock_row)}) "
            f"SELECT (SELECT count FROM rate), (SELECT times FROM flood), "
            f"EXISTS (SELECT 1 FROM taken)"
        )
        span = interval * (FLOOD_REQUESTS - 1)
        params = [
            rate_key, window_start,
            flood_key, now, limit, interval > 0, FLOOD_REQUESTS,
            lock.key if lock else "", lock.holder if lock else "",
            now + (lock.seconds if lock else 0), lock is not None, limit,
            FLOOD_REQUESTS, span, now,
        ]  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            count, times, locked = cursor.fetchone()
        return AdmitCounts(
            count=int(count),
            times=None if times is None else [float(t) for t in times],
            locked=bool(locked),
        )
