"""Sign-in's reads: whose an API key is, and a user's own tokens."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.db.models import QuerySet
from django.utils import timezone
from rest_framework.authtoken.models import Token

from accounts.models import ApiToken, Preferences
from accounts.services import API_KEY_PREFIX, api_key_hash


class TokenInvalid(Exception):
    """No active user holds this key."""


class TokenSignInStale(Exception):
    """The key's user signs in through the provider, and last did so longer ago than
    OIDC_SESSION_MAX_AGE: the groups the token would act with may be gone at the provider."""

    def __init__(self) -> None:
        super().__init__(
            "Your sign-in with your organisation has expired: sign in to Sourced again, "
            "then this token works again."
        )


class TokenExpired(Exception):
    """The key was valid until `expired` (an aware datetime)."""

    def __init__(self, expired) -> None:
        super().__init__(f"Token expired on {expired:%Y-%m-%d %H:%M} UTC.")
        self.expired = expired


def api_token_user(*, key: str) -> AbstractBaseUser:
    """The active user whose API token `key` is: a personal token (accounts.ApiToken, its key
    starting with API_KEY_PREFIX) or a token of DRF's (`drf_create_token`), which expires
    API_TOKEN_TTL days after its creation. A user tied to the provider (an OidcIdentity) is
    refused once their last sign-in is older than OIDC_SESSION_MAX_AGE, as their session
    would be (docs/decisions/0140-sign-in-age-for-sessions-tokens-and-sockets.md). One
    query either way.

    Raises TokenInvalid (unknown key, inactive user), TokenExpired or TokenSignInStale.
    """
    now = timezone.now()
    if key.startswith(API_KEY_PREFIX):
        token = (
            ApiToken.objects.select_related("user", "user__oidc_identity")
            .filter(key_hash=api_key_hash(key))
            .first()
        )
        if token is None:
            raise TokenInvalid
        expires = token.expires
        user = token.user
    else:
        drf_token = (
            Token.objects.select_related("user", "user__oidc_identity").filter(key=key).first()
        )
        if drf_token is None:
            raise TokenInvalid
        expires = drf_token.created + timedelta(days=settings.API_TOKEN_TTL)
        user = drf_token.user
    if not user.is_active:
        raise TokenInvalid
    if expires <= now:
        raise TokenExpired(expires)
    identity = getattr(user, "oidc_identity", None)
    if identity is not None and (
        identity.last_sign_in is None
        or identity.last_sign_in < now - timedelta(seconds=settings.OIDC_SESSION_MAX_AGE)
    ):
        raise TokenSignInStale
    return user


def api_tokens_of(*, user: AbstractBaseUser) -> QuerySet[ApiToken]:
    """`user`'s personal tokens, newest first."""
    return ApiToken.objects.filter(user=user).order_by("-created")


def preferences_of(*, user: AbstractBaseUser) -> Preferences:
    """The user's display preferences: their stored row, or an unsaved one holding the
    defaults when they never changed any."""
    found = Preferences.objects.filter(user_id=user.pk).first()
    return found or Preferences(user_id=user.pk)
