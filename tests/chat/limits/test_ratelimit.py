"""The rate limit counts every request, also when they arrive together (docs/product.md §10),
on each store: the same tests (`StoreTests`) run on PostgreSQL and on a real redis-server."""

from __future__ import annotations

import time

import pytest

import chat.ratelimit
from chat.models import RequestTimes
from chat.ratelimit import (
    Admission,
    InFlightLock,
    Throttled,
    chat_admit,
    chat_rate_limited,
    chat_throttled,
    flood_hit,
    in_flight_holder,
    in_flight_release,
    in_flight_renew,
    rate_parse,
    search_rate_limited,
    store_get,
    throttled_message,
)
from chat.ratelimit.postgres import PostgresStore
from chat.ratelimit.redis import RedisStore
from tests.support.ratelimit import CONCURRENT, hits_at_once


def at_times(monkeypatch, *times: float) -> None:
    clock = iter(times)
    monkeypatch.setattr(chat.ratelimit, "_now", lambda: next(clock))


@pytest.mark.django_db(transaction=True)
class StoreTests:
    """The limits' behaviour on one store; a subclass chooses the store (`store` fixture) and
    says where it keeps a key's request times (`recorded_times`)."""

    store_class: type

    def recorded_times(self, key: str) -> list[float]:
        raise NotImplementedError

    def test_the_store_is_chosen_by_the_settings(self, store):
        assert type(store_get()) is self.store_class

    def test_fifty_concurrent_chat_requests_admit_exactly_the_limit(
        self, store, staff_user, pinned_window
    ):
        results = hits_at_once(staff_user, chat_rate_limited, CONCURRENT)

        assert sum(r is None for r in results) == 20  # the default, 20/m
        assert all(1 <= r <= 60 for r in results if r is not None)

    def test_concurrent_chat_requests_through_the_admission_count_exactly(
        self, store, staff_user, other_staff_user, settings, pinned_window
    ):
        """`chat_throttled` (the API's and, with the lock, the WebSocket's admission: one
        statement on PostgreSQL) counts as exactly as each rule alone."""
        settings.CHAT_FLOOD_MIN_INTERVAL = 0
        results = hits_at_once(staff_user, chat_throttled, CONCURRENT)
        assert sum(r is None for r in results) == 20  # the default, 20/m
        assert all(r is not None and not r.flood for r in results if r is not None)

        settings.CHAT_FLOOD_MIN_INTERVAL = 2
        results = hits_at_once(other_staff_user, chat_throttled, 12)
        assert results.count(None) == 4  # the fifth on are a flood, whatever the order
        assert all(r.flood for r in results if r is not None)

    def test_the_limit_follows_the_setting_and_is_per_user_and_per_group(
        self, store, staff_user, other_staff_user, settings, pinned_window, monkeypatch
    ):
        settings.CHAT_RATE_LIMIT = "7/m"
        results = hits_at_once(staff_user, chat_rate_limited, 20)

        assert sum(r is None for r in results) == 7
        assert chat_rate_limited(other_staff_user) is None
        assert search_rate_limited(staff_user) is None  # searches have their own bucket
        # The next window starts a fresh count.
        monkeypatch.setattr(chat.ratelimit, "_now", lambda: pinned_window + 60)
        assert chat_rate_limited(staff_user) is None

    # --- The flood rule ---------------------------------------------------------------------
    def test_five_requests_less_than_two_seconds_apart_on_average_are_a_flood(
        self, store, staff_user, other_staff_user, monkeypatch
    ):
        at_times(monkeypatch, 0.0, 1.0, 2.0, 3.0, 4.0, 4.0)

        assert [flood_hit(staff_user) for _ in range(4)] == [None] * 4
        assert flood_hit(staff_user) == 5  # the next one is fine at 1.0 + 4 x 2 s = 9.0
        assert flood_hit(other_staff_user) is None  # per user

    def test_requests_two_seconds_apart_on_average_are_no_flood(
        self, store, staff_user, monkeypatch
    ):
        at_times(monkeypatch, 0.0, 0.5, 1.0, 7.0, 8.0, 8.5)

        assert [flood_hit(staff_user) for _ in range(6)] == [None] * 6
        # only the last five are kept
        assert self.recorded_times(f"flood:{staff_user.pk}") == [0.5, 1.0, 7.0, 8.0, 8.5]

    def test_concurrent_requests_are_all_recorded_by_the_flood_rule(self, store, staff_user):
        results = hits_at_once(staff_user, flood_hit, 12)

        assert results.count(None) == 4  # the fifth on are a flood, whatever the order
        assert len(self.recorded_times(f"flood:{staff_user.pk}")) == 5

    def test_the_flood_rule_can_be_turned_off(self, store, staff_user, monkeypatch, settings):
        settings.CHAT_FLOOD_MIN_INTERVAL = 0
        at_times(monkeypatch, *[0.0] * 8)
        assert [chat_throttled(staff_user) for _ in range(8)] == [None] * 8

    def test_a_chat_request_is_throttled_by_the_rate_before_the_flood_rule(
        self, store, staff_user, monkeypatch
    ):
        monkeypatch.setattr(chat.ratelimit, "_now", lambda: 60.0)
        outcomes = [chat_throttled(staff_user) for _ in range(21)]

        assert outcomes[:4] == [None] * 4
        assert all(o is not None and o.flood for o in outcomes[4:20])
        assert not outcomes[20].flood and outcomes[20].retry_after == 60

    # --- The in-flight lock taken with the admission (chat_admit) ---------------------------
    def test_the_lock_is_taken_only_by_an_admitted_request_and_only_once(
        self, store, staff_user, other_staff_user, monkeypatch, settings
    ):
        settings.CHAT_RATE_LIMIT = "3/m"
        monkeypatch.setattr(chat.ratelimit, "_now", lambda: 61.0)
        first = InFlightLock(key="conversation:1", holder="socket-a", seconds=300)
        second = InFlightLock(key="conversation:1", holder="socket-b", seconds=300)

        assert chat_admit(staff_user, lock=first) == Admission(locked=True)
        assert in_flight_holder("conversation:1") == "socket-a"
        assert chat_admit(other_staff_user, lock=second) == Admission(locked=False)  # counted
        in_flight_release(second)  # not its holder: nothing happens
        assert in_flight_holder("conversation:1") == "socket-a"
        in_flight_release(first)
        assert in_flight_holder("conversation:1") is None

        assert chat_admit(staff_user, lock=first).locked  # 2nd request of the window
        in_flight_release(first)
        assert chat_admit(staff_user).throttled is None  # 3rd, without a lock
        refused = chat_admit(staff_user, lock=first)  # 4th: over the rate, the lock stays free
        assert refused.throttled is not None and not refused.locked
        assert in_flight_holder("conversation:1") is None

    def test_a_lock_left_by_a_holder_that_died_lapses(self, store, staff_user):
        dead = InFlightLock(key="conversation:2", holder="gone", seconds=1)
        alive = InFlightLock(key="conversation:2", holder="socket", seconds=300)
        assert chat_admit(staff_user, lock=dead).locked
        assert not chat_admit(staff_user, lock=alive).locked
        time.sleep(1.2)
        assert in_flight_holder("conversation:2") is None
        assert chat_admit(staff_user, lock=alive).locked
        assert in_flight_holder("conversation:2") == "socket"
        in_flight_release(dead)  # the dead holder's late release frees nothing of the other's
        assert in_flight_holder("conversation:2") == "socket"

    def test_a_lock_renewed_by_its_holder_outlives_its_first_expiry(self, store, staff_user):
        short = InFlightLock(key="conversation:3", holder="socket", seconds=1)
        other = InFlightLock(key="conversation:3", holder="other", seconds=300)
        assert chat_admit(staff_user, lock=short).locked
        assert not in_flight_renew(other)  # not its holder: nothing changes
        assert in_flight_renew(InFlightLock(key="conversation:3", holder="socket", seconds=300))
        time.sleep(1.2)
        assert in_flight_holder("conversation:3") == "socket"
        assert not chat_admit(staff_user, lock=other).locked


class TestPostgresStore(StoreTests):
    store_class = PostgresStore

    @pytest.fixture
    def store(self, settings):
        settings.REDIS_URL = ""

    def recorded_times(self, key: str) -> list[float]:
        return RequestTimes.objects.get(key=key).times


class TestRedisStore(StoreTests):
    store_class = RedisStore

    @pytest.fixture
    def store(self, on_redis):
        self.client = on_redis

    def recorded_times(self, key: str) -> list[float]:
        return [float(t) for t in self.client.lrange(f"sourced:flood:{key}", 0, -1)]


# --- What does not depend on the store -----------------------------------------------------------
def test_rates_are_read_in_django_ratelimits_notation():
    assert rate_parse("20/m") == chat.ratelimit.Rate(limit=20, period=60)
    assert rate_parse("100/h") == chat.ratelimit.Rate(limit=100, period=3600)
    assert rate_parse("5/10s") == chat.ratelimit.Rate(limit=5, period=10)
    with pytest.raises(ValueError, match="Invalid rate"):
        rate_parse("twenty a minute")


def test_a_throttled_user_is_told_why_and_for_how_long():
    assert throttled_message(Throttled(retry_after=1)) == (
        "You are asking questions faster than the limit allows. Please wait 1 second, "
        "then try again."
    )
    assert throttled_message(Throttled(retry_after=7, flood=True)) == (
        "Questions are coming very fast. Please wait 7 seconds, then try again."
    )


@pytest.mark.django_db
def test_search_api_is_rate_limited_like_chat(client, staff_user, settings, pinned_window):
    settings.CHAT_RATE_LIMIT = "2/m"
    client.force_login(staff_user)

    statuses = [client.get("/api/search", {"q": "annual leave"}).status_code for _ in range(2)]
    limited = client.get("/api/search", {"q": "annual leave"})

    assert statuses == [200, 200]
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "rate-limited"
    assert 1 <= int(limited["Retry-After"]) <= 60
