"""The OpenID Connect client: Authlib's Django client, configured from settings (OIDC_*).

Authlib does the protocol: the authorization request with state, nonce and PKCE (S256), the
code exchange, and the ID token's checks (signature against the provider's published keys,
issuer, audience, expiry, nonce). Why Authlib: docs/decisions/0065-oidc-library.md.
"""

from __future__ import annotations

import hashlib
import logging
from functools import lru_cache

import requests
from authlib.common.errors import AuthlibBaseError
from authlib.integrations.django_client import DjangoOAuth2App, OAuth
from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest
from joserfc.errors import JoseError

log = logging.getLogger("accounts.oidc")

# After the provider could not be reached, the login page says so for this long without
# trying again (a provider that times out would otherwise slow every login page down).
DOWN_SECONDS = 60


class ProviderUnavailable(Exception):
    """The provider could not be reached, or answered with an error status."""


class SignInRejected(Exception):
    """The provider's answer failed a check (state, token, signature, claims); the message is
    what was wrong, for the log."""


def oidc_enabled() -> bool:
    """Whether sign-in with a provider is configured (issuer and client id)."""
    return bool(settings.OIDC_ISSUER and settings.OIDC_CLIENT_ID)


def oidc_client() -> DjangoOAuth2App:
    """The client for the current settings (one per configuration and process: it keeps the
    provider's metadata and keys once read)."""
    return _client(
        settings.OIDC_ISSUER,
        settings.OIDC_CLIENT_ID,
        settings.OIDC_CLIENT_SECRET,
        settings.OIDC_SCOPES,
        settings.OIDC_TIMEOUT,
    )


def provider_reachable() -> bool:
    """Whether the provider's metadata can be read (once read, it is kept: True at no cost).
    False for DOWN_SECONDS after any failure to reach the provider."""
    if cache.get(_down_key()):
        return False
    try:
        oidc_client().load_server_metadata()
    except (requests.RequestException, ValueError):
        provider_down_mark()
        return False
    return True


def provider_down_mark() -> None:
    """Remember for DOWN_SECONDS that the provider could not be reached."""
    cache.set(_down_key(), True, DOWN_SECONDS)


def _down_key() -> str:
    return "oidc-down:" + hashlib.sha256(settings.OIDC_ISSUER.encode()).hexdigest()[:16]


@lru_cache(maxsize=4)
def _client(
    issuer: str, client_id: str, client_secret: str, scopes: str, timeout: float
) -> DjangoOAuth2App:
    oauth = OAuth()
    return oauth.register(
        name="oidc",
        client_id=client_id,
        client_secret=client_secret,
        server_metadata_url=f"{issuer}/.well-known/openid-configuration",
        client_kwargs={
            "scope": scopes,
            "code_challenge_method": "S256",
            "default_timeout": timeout,
        },
    )


def authorization_redirect(request: HttpRequest, *, redirect_uri: str):
    """The redirect to the provider's authorization endpoint; state, nonce and the PKCE
    verifier are kept in the session. Raises ProviderUnavailable."""
    client = oidc_client()
    try:
        return client.authorize_redirect(request, redirect_uri)
    except (requests.RequestException, ValueError) as error:
        _forget(client)
        provider_down_mark()
        raise ProviderUnavailable(str(error)) from error


def authorization_finish(request: HttpRequest) -> tuple[dict, str]:
    """Exchange the callback's code and check the ID token; the claims of the ID token merged
    with the userinfo response (the ID token wins), and the raw ID token (for logout).

    Raises SignInRejected (a state that is not this session's, a code the provider refuses,
    an ID token that fails a check) or ProviderUnavailable.
    """
    client = oidc_client()
    try:
        metadata = client.load_server_metadata()
        issuer = metadata["issuer"]
        _auth_method_choose(client, metadata)
        # Authlib checks `aud` only through `azp` by default: ask for both claims' values.
        claims_options = {
            "iss": {"essential": True, "values": [issuer]},
            "aud": {"essential": True, "values": [client.client_id]},
        }
        token = client.authorize_access_token(request, claims_options=claims_options)
    except requests.RequestException as error:
        provider_down_mark()
        raise ProviderUnavailable(str(error)) from error
    except (AuthlibBaseError, JoseError, ValueError, KeyError) as error:
        raise SignInRejected(_describe(error)) from error
    claims = token.get("userinfo")
    if not claims:
        raise SignInRejected("the provider returned no ID token")
    userinfo: dict = {}
    if client.load_server_metadata().get("userinfo_endpoint"):
        try:
            userinfo = dict(client.userinfo(token=token))
        except (requests.RequestException, AuthlibBaseError, ValueError) as error:
            raise ProviderUnavailable(f"userinfo: {error}") from error
        if userinfo.get("sub") not in (None, claims["sub"]):
            raise SignInRejected("the userinfo response is about another subject")
    return {**userinfo, **dict(claims)}, token.get("id_token", "")


def logout_url(*, id_token: str, post_logout_redirect_uri: str) -> str | None:
    """The provider's end-session URL (RP-initiated logout), or None when its metadata names
    none or it cannot be reached."""
    client = oidc_client()
    try:
        metadata = client.load_server_metadata()
    except (requests.RequestException, ValueError):
        return None
    if not metadata.get("end_session_endpoint"):
        return None
    result = client.create_logout_url(
        post_logout_redirect_uri=post_logout_redirect_uri,
        id_token_hint=id_token or None,
        client_id=client.client_id,
    )
    return result["url"]


def _auth_method_choose(client: DjangoOAuth2App, metadata: dict) -> None:
    """The client secret goes in the Authorization header (the protocol's default), or in
    the form for a provider whose metadata offers only that."""
    methods = metadata.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
    if "client_secret_basic" not in methods and "client_secret_post" in methods:
        client.client_kwargs["token_endpoint_auth_method"] = "client_secret_post"


def _forget(client: DjangoOAuth2App) -> None:
    """Drop metadata read halfway, so the next attempt reads it again."""
    client.server_metadata.pop("_loaded_at", None)


def _describe(error: Exception) -> str:
    description = getattr(error, "description", "") or ""
    name = getattr(error, "error", "") or type(error).__name__
    return f"{name}: {description}".rstrip(": ") if description else str(name)
