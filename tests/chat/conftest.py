"""Fixtures of the chat tests: the live server, a controlled knowledge base, a pinned clock."""

from __future__ import annotations

import time

import pytest
from django_redis import get_redis_connection

import chat.ratelimit
from tests.support.knowledge_base import (
    EXPENSES_TEXTS,
    LEAVE_TEXTS,
    SECURITY_TEXTS,
    document_create,
)
from tests.support.live_server import LIVE_SERVER_DELAY_MS, daphne_server, database_url_of
from tests.support.redis_server import redis_server


@pytest.fixture(scope="session")
def live_server_url(django_db_setup):
    """daphne serving the app on the test database, started once per test session."""
    from django.db import connection

    with daphne_server(
        database_url_of(connection.settings_dict),
        env={"CHAT_STREAM_DELAY_MS": str(LIVE_SERVER_DELAY_MS)},
    ) as url:
        yield url


@pytest.fixture
def policies_kb(db):
    """Three small policies: the handbook (pages 3-4), expenses and security."""
    return {
        "handbook": document_create(
            title="Staff handbook",
            texts=LEAVE_TEXTS,
            pages=[3, 4],
            sections=["Leave > Annual leave", "Leave > Carry-over"],
            url="https://intranet.example/handbook",
        ),
        "expenses": document_create(
            title="Expenses policy", texts=EXPENSES_TEXTS, pages=[1, 2], sections=None
        ),
        "security": document_create(
            title="Security policy", texts=SECURITY_TEXTS, sections=["Passwords"]
        ),
    }


@pytest.fixture
def pinned_window(monkeypatch):
    """The clock at the first second of a one-minute window, so that a burst on a loaded
    machine is never split between two windows."""
    pinned = (int(time.time()) // 60) * 60 + 1.0
    monkeypatch.setattr(chat.ratelimit, "_now", lambda: pinned)
    return pinned


@pytest.fixture(scope="module")
def redis_url():
    """A real redis-server on a free loopback port, for one test module."""
    with redis_server() as url:
        yield url


@pytest.fixture
def on_redis(settings, redis_url):
    """The settings REDIS_URL gives: the django-redis cache (the counters' store)."""
    settings.REDIS_URL = redis_url
    settings.CACHES = {
        "default": {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": redis_url}
    }
    client = get_redis_connection("default")
    client.flushdb()
    yield client
    client.flushdb()
