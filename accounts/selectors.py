"""Sign-in's reads: whose an API key is, and a user's own tokens."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone
from rest_framework.authtoken.models import Token

from accounts.models import ApiToken, OidcIdentity, Preferences
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
    statement either way, written out: it runs for every request that carries a token
    (docs/decisions/0152-statements-written-out.md).

    Raises TokenInvalid (unknown key, inactive user), TokenExpired or TokenSignInStale.
    """
    now = timezone.now()
    personal = key.startswith(API_KEY_PREFIX)
    found = _token_row(_TOKEN_USER_SQL[personal], api_key_hash(key) if personal else key)
    if found is None:
        raise TokenInvalid
    user, issued, has_identity, last_sign_in = found
    expires = issued if personal else issued + timedelta(days=settings.API_TOKEN_TTL)
    if not user.is_active:
        raise TokenInvalid
    if expires <= now:
        raise TokenExpired(expires)
    if has_identity and (
        last_sign_in is None
        or last_sign_in < now - timedelta(seconds=settings.OIDC_SESSION_MAX_AGE)
    ):
        raise TokenSignInStale
    return user


_USER = get_user_model()
# The user's fields in the order the statement reads their columns (`Model.from_db`).
_USER_FIELDS = [field.attname for field in _USER._meta.concrete_fields]


def _token_user_sql(token_table: str, key_column: str, issued_column: str) -> str:
    """The statement reading a token's user (every column, as the ORM would), when the token
    was issued or expires (`issued_column`) and the user's identity at the provider, if any."""
    name = connection.ops.quote_name
    user_columns = ", ".join(f"u.{name(field.column)}" for field in _USER._meta.concrete_fields)
    user_id = f"u.{name(_USER._meta.pk.column)}"
    return (
        f"SELECT {user_columns}, t.{name(issued_column)}, o.id IS NOT NULL, o.last_sign_in "  # noqa: S608
        f"FROM {name(token_table)} t JOIN {name(_USER._meta.db_table)} u ON {user_id} = t.user_id "
        f"LEFT JOIN {name(OidcIdentity._meta.db_table)} o ON o.user_id = {user_id} "
        f"WHERE t.{name(key_column)} = %s"
    )


# By whether the key is a personal token's (its hash is looked up) or DRF's.
_TOKEN_USER_SQL = {
    True: _token_user_sql(ApiToken._meta.db_table, "key_hash", "expires"),
    False: _token_user_sql(Token._meta.db_table, "key", "created"),
}


def _token_row(
    sql: str, key: str
) -> tuple[AbstractBaseUser, datetime, bool, datetime | None] | None:
    """(user, issued or expires, has an identity at the provider, its last sign-in), or None
    when no token has this key."""
    with connection.cursor() as cursor:
        cursor.execute(sql, [key])
        row = cursor.fetchone()
    if row is None:
        return None
    count = len(_USER_FIELDS)
    user = _USER.from_db(connection.alias, _USER_FIELDS, row[:count])
    issued, has_identity, last_sign_in = row[count:]
    return user, issued, has_identity, last_sign_in


def api_tokens_of(*, user: AbstractBaseUser) -> QuerySet[ApiToken]:
    """`user`'s personal tokens, newest first."""
    return ApiToken.objects.filter(user=user).order_by("-created")


def preferences_of(*, user: AbstractBaseUser) -> Preferences:
    """The user's display preferences: their stored row, or an unsaved one holding the
    defaults when they never changed any."""
    found = Preferences.objects.filter(user_id=user.pk).first()
    return found or Preferences(user_id=user.pk)
