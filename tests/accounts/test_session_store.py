"""The session engine (accounts/session_store.py): Django's database sessions, read in one
written-out statement; the same sessions found, the same expired or unknown ones not."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.session_store import SessionStore

pytestmark = pytest.mark.django_db


def test_it_is_the_configured_engine():
    assert settings.SESSION_ENGINE == "accounts.session_store"


def test_a_stored_session_is_read_in_one_statement():
    stored = SessionStore()
    stored["_auth_user_id"] = "7"
    stored["flag"] = [1, "two"]
    stored.save()

    with CaptureQueriesContext(connection) as statements:
        read = SessionStore(stored.session_key)
        assert read["flag"] == [1, "two"] and read["_auth_user_id"] == "7"
    assert len(statements) == 1
    assert read.session_key == stored.session_key


def test_an_expired_or_unknown_session_is_empty_and_forgets_its_key():
    stored = SessionStore()
    stored["flag"] = True
    stored.save()
    Session.objects.filter(pk=stored.session_key).update(
        expire_date=timezone.now() - timedelta(seconds=1)
    )
    expired = SessionStore(stored.session_key)
    assert dict(expired.items()) == {} and expired.session_key is None

    unknown = SessionStore("x" * 32)
    assert dict(unknown.items()) == {} and unknown.session_key is None
