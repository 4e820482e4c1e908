"""API authentication: API tokens (`Authorization: Token <key>`, `Bearer <key>` accepted too;
personal ones and DRF's, both expiring: accounts.selectors.api_token_user) and the browser
session (CSRF-checked), for DRF views and the async streaming view alike."""

from __future__ import annotations

from django.contrib.auth.base_user import AbstractBaseUser
from django.http import HttpRequest
from django.middleware.csrf import CsrfViewMiddleware
from rest_framework import authentication, exceptions

from accounts.selectors import TokenExpired, TokenInvalid, TokenSignInStale, api_token_user
from chat.errors import AnswerError
from chat.ratelimit import Throttled, chat_throttled
from knowledge.access import user_is_staff

KEYWORDS = ("token", "bearer")


class TokenAuthentication(authentication.TokenAuthentication):
    """DRF's token authentication, also reading `Bearer <key>` (what most HTTP clients send)."""

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower().decode(errors="replace") not in KEYWORDS:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Invalid token header.")
        try:
            key = header[1].decode()
        except UnicodeError:
            raise exceptions.AuthenticationFailed("Invalid token header.") from None
        return self.authenticate_credentials(key)

    def authenticate_credentials(self, key):
        try:
            return api_token_user(key=key), key
        except TokenInvalid:
            raise exceptions.AuthenticationFailed("Invalid token.") from None
        except (TokenExpired, TokenSignInStale) as error:
            raise exceptions.AuthenticationFailed(str(error)) from None


class _CsrfCheck(CsrfViewMiddleware):
    def _reject(self, request, reason):
        return reason


def _csrf_failure(request: HttpRequest) -> str | None:
    check = _CsrfCheck(lambda _request: None)
    check.process_request(request)
    return check.process_view(request, None, (), {})


def token_user(authorization: str) -> AbstractBaseUser | None:
    """The user of an `Authorization` header's API token (`Token <key>` or `Bearer <key>`);
    None when the header names no token. Synchronous (database).

    Raises AnswerError unauthorized (401) for a malformed header, an unknown or an expired
    token.
    """
    header = authorization.split()
    if not header or header[0].lower() not in KEYWORDS:
        return None
    if len(header) != 2:
        raise AnswerError("unauthorized", "Invalid token header.")
    try:
        return api_token_user(key=header[1])
    except TokenInvalid:
        raise AnswerError("unauthorized", "Invalid token.") from None
    except (TokenExpired, TokenSignInStale) as error:
        raise AnswerError("unauthorized", str(error)) from None


def staff_throttled(user: AbstractBaseUser) -> Throttled | None:
    """Counting one chat request of `user` (who must be staff: AnswerError forbidden
    otherwise), whether it must wait: the rate limit or the flood rule. Every transport that
    answers questions admits them here."""
    if not user_is_staff(user):
        raise AnswerError.forbidden("The API is for staff only.")
    return chat_throttled(user)


def request_user(request: HttpRequest) -> AbstractBaseUser:
    """The active user of a request to an async API view: token first, then the session
    (whose unsafe requests must carry the CSRF token, as in DRF's SessionAuthentication).
    Synchronous (database): async views call it through `database_sync_to_async`.

    Raises AnswerError: unauthorized (401) without valid credentials, forbidden (403) on a
    CSRF failure.
    """
    token_holder = token_user(request.headers.get("Authorization", ""))
    if token_holder is not None:
        return token_holder
    user = request.user
    if not user.is_authenticated or not user.is_active:
        raise AnswerError("unauthorized", "Authentication credentials were not provided.")
    reason = _csrf_failure(request)
    if reason:
        raise AnswerError("forbidden", f"CSRF Failed: {reason}")
    return user
