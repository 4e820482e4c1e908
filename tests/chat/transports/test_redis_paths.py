"""The Redis paths (REDIS_URL set) against a real redis-server: the rate limit's keys (one per
window, expiring with it) and the channels-redis layer carrying a message between two layers
as between two processes. (test_ratelimit.py runs the limits' rules on both stores;
test_scale_out.py runs them through two daphne processes.)"""

from __future__ import annotations

import asyncio

import pytest
from channels_redis.core import RedisChannelLayer

from chat.ratelimit import chat_rate_limited, flood_hit, search_rate_limited
from tests.support.ratelimit import CONCURRENT, hits_at_once


@pytest.mark.django_db
def test_each_window_has_a_redis_key_that_expires_with_it(
    staff_user,
    other_staff_user,
    on_redis,  # noqa: F811
    pinned_window,  # noqa: F811
):
    results = hits_at_once(staff_user, chat_rate_limited, CONCURRENT)

    assert sum(r is None for r in results) == 20  # the default, 20/m
    key = f"sourced:ratelimit:chat:{staff_user.pk}:{int(pinned_window // 60) * 60}"
    assert int(on_redis.get(key)) == CONCURRENT
    assert 0 < on_redis.ttl(key) <= 61  # the key goes with its window
    assert chat_rate_limited(other_staff_user) is None  # per user
    assert search_rate_limited(staff_user) is None  # and per group


@pytest.mark.django_db
def test_the_flood_rules_times_are_a_redis_list_that_expires(staff_user, on_redis):  # noqa: F811
    results = hits_at_once(staff_user, flood_hit, 12)

    assert results.count(None) == 4  # the fifth on are a flood, whatever the order
    assert on_redis.llen(f"sourced:flood:flood:{staff_user.pk}") == 5
    assert on_redis.ttl(f"sourced:flood:flood:{staff_user.pk}") > 0


async def test_the_redis_channel_layer_carries_a_message_between_two_layers(redis_url):  # noqa: F811
    running, stopping = RedisChannelLayer(hosts=[redis_url]), RedisChannelLayer(hosts=[redis_url])
    try:
        channel = await running.new_channel()
        await stopping.send(channel, {"type": "chat.stop"})
        assert await running.receive(channel) == {"type": "chat.stop"}
    finally:
        await running.flush()
        await running.close_pools()
        await stopping.close_pools()


async def test_an_idle_channel_of_the_configured_layer_waits_past_redis_blocking_pop(
    redis_url,  # noqa: F811
    settings,
):
    """The layer as settings configure it: a socket that gets no message for longer than the
    blocking pop (5 s) keeps waiting. (With redis-py 8's default 5 s read timeout the read
    failed with TimeoutError and the consumer's socket was closed with 1011.)"""
    layer = RedisChannelLayer(hosts=[{"address": redis_url, **settings.REDIS_CHANNEL_HOST_OPTIONS}])
    try:
        channel = await layer.new_channel()
        with pytest.raises(asyncio.TimeoutError):  # ours, after 7 s: nothing came, no error
            await asyncio.wait_for(layer.receive(channel), timeout=7)
        await layer.send(channel, {"type": "chat.stop"})
        assert await layer.receive(channel) == {"type": "chat.stop"}
    finally:
        await layer.flush()
        await layer.close_pools()
