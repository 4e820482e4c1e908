"""Fixtures of the sign-in tests: the test OpenID provider, and Sourced configured for it."""

from __future__ import annotations

import pytest

from tests.accounts.provider import Provider, provider_running

SOURCED_CALLBACK = "http://testserver/oidc/callback/"
SOURCED_LOGIN = "http://testserver/login/"


@pytest.fixture(scope="session")
def oidc_provider(tmp_path_factory) -> Provider:
    with provider_running(tmp_path_factory.mktemp("oidc-provider")) as provider:
        provider.client_register(SOURCED_CALLBACK, post_logout=(SOURCED_LOGIN,))
        yield provider


@pytest.fixture
def provider(oidc_provider: Provider, settings) -> Provider:
    """The provider, honest, and Sourced configured to sign in with it."""
    oidc_provider.misbehave("")
    settings.OIDC_ISSUER = oidc_provider.issuer
    settings.OIDC_CLIENT_ID = oidc_provider.client_id
    settings.OIDC_CLIENT_SECRET = oidc_provider.client_secret
    settings.OIDC_STAFF_GROUPS = []
    settings.OIDC_ADMIN_GROUPS = []
    return oidc_provider
