"""How long a provider sign-in lasts: its time kept in the session, checked on every request
(`SignInAgeMiddleware`) and on every WebSocket message (`session_standing`).

A session started through the provider ends OIDC_SESSION_MAX_AGE seconds after the sign-in,
whatever happens meanwhile: nothing but a new sign-in renews it
(docs/decisions/0140-sign-in-age-for-sessions-tokens-and-sockets.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib import import_module
from types import SimpleNamespace

from django.conf import settings
from django.contrib import auth
from django.contrib.sessions.backends.base import SessionBase
from django.http import HttpRequest, HttpResponse

from knowledge.access import user_is_staff

# The raw ID token (for the provider's logout) and the sign-in's time (Unix seconds), kept in
# the session by `accounts.views.oidc_callback`.
SESSION_ID_TOKEN = "oidc_id_token"
SESSION_SIGNED_IN_AT = "oidc_signed_in_at"


def session_sign_in_record(session: SessionBase) -> None:
    """Mark `session` as a provider sign-in made now, ending OIDC_SESSION_MAX_AGE seconds
    from now: the expiry is a date, not an age, so saving the session later (a page that
    writes to it, another `GET /oidc/login/`) does not push it back."""
    now = time.time()
    session[SESSION_SIGNED_IN_AT] = int(now)
    session.set_expiry(datetime.fromtimestamp(now + settings.OIDC_SESSION_MAX_AGE, tz=UTC))


def session_sign_in_stale(session: SessionBase | dict) -> bool:
    """Whether `session` is a provider sign-in older than OIDC_SESSION_MAX_AGE. A provider
    session without its sign-in time (made before the time was kept) counts as stale; a
    password session never is."""
    signed_in_at = session.get(SESSION_SIGNED_IN_AT)
    if signed_in_at is None:
        return SESSION_ID_TOKEN in session
    try:
        age = time.time() - float(signed_in_at)
    except (TypeError, ValueError):
        return True
    return age > settings.OIDC_SESSION_MAX_AGE


class SignInAgeMiddleware:
    """Signs out a request whose provider sign-in is older than OIDC_SESSION_MAX_AGE (the
    session is flushed, the user anonymous: pages send it to the login page). Costs nothing
    beyond reading the session, which the authentication middleware before it reads anyway."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        session = getattr(request, "session", None)
        if session is not None and session_sign_in_stale(session):
            auth.logout(request)
        return self.get_response(request)


class Standing:
    """What a WebSocket's session is worth now (`session_standing`)."""

    SIGNED_IN = "signed-in"  # the same user, signed in, active and staff
    SIGNED_OUT = "signed-out"  # the session is gone, expired, stale, or its user inactive
    FORBIDDEN = "forbidden"  # still signed in, but no longer staff


def session_standing(*, session_key: str | None, user_id: object) -> str:
    """Whether the session `session_key` still signs in user `user_id`: read again from the
    session store (not the copy the socket was opened with), then checked as Django checks
    a request's session (`auth.get_user`: the user exists and is active, the session's hash
    matches their password) and for the provider sign-in's age. A `Standing` value. Two
    queries with the database session store (the session, the user)."""
    if not session_key:
        return Standing.SIGNED_OUT
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = auth.get_user(SimpleNamespace(session=store))
    if not user.is_authenticated or str(user.pk) != str(user_id):
        return Standing.SIGNED_OUT
    if session_sign_in_stale(store):
        return Standing.SIGNED_OUT
    if not user_is_staff(user):
        return Standing.FORBIDDEN
    return Standing.SIGNED_IN
