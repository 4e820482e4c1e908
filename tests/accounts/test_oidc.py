"""Sign-in with a real OpenID provider (tests/oidc_provider/: django-oauth-toolkit, RS256, in a
subprocess on loopback): users and groups made from its claims, refusals, forged and expired
tokens, replays, and the provider down."""

from __future__ import annotations

import logging
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth.models import Group, User
from django.test import Client

from accounts.models import OidcIdentity
from knowledge.access import documents_readable
from knowledge.collections import collection_create
from tests.accounts.provider import Provider, provider_sign_in
from tests.support.knowledge_base import document_create

pytestmark = pytest.mark.django_db

PASSWORD = "provider-pass-4821"


def sign_in(client: Client, provider: Provider, username: str):
    """The whole round trip: Sourced's button, the provider's login page, the callback.
    Sourced's answer to the callback."""
    start = client.get("/oidc/login/")
    assert start.status_code == 302, start.content
    assert start["Location"].startswith(provider.issuer + "/authorize/")
    callback = provider_sign_in(start["Location"], username=username, password=PASSWORD)
    assert callback.startswith("http://testserver/oidc/callback/"), callback
    return client.get(callback.removeprefix("http://testserver"))


def test_the_authorization_request_carries_state_nonce_and_pkce(provider):
    query = parse_qs(urlsplit(Client().get("/oidc/login/")["Location"]).query)
    assert query["response_type"] == ["code"]
    assert query["client_id"] == [provider.client_id]
    assert query["scope"] == ["openid email profile"]
    assert query["code_challenge_method"] == ["S256"]
    assert len(query["code_challenge"][0]) >= 43
    assert len(query["state"][0]) >= 20 and len(query["nonce"][0]) >= 20


def test_first_sign_in_creates_the_user_with_the_providers_groups(provider):
    provider.user_set(
        "ada", password=PASSWORD, groups=["finance", "hr"], email="ada@example.org",
        first_name="Ada", last_name="Lovelace",
    )  # fmt: skip
    client = Client()
    response = sign_in(client, provider, "ada")
    assert response.status_code == 302 and response["Location"] == "/"
    user = User.objects.get(username="ada")
    assert (user.email, user.first_name, user.last_name) == ("ada@example.org", "Ada", "Lovelace")
    assert user.is_staff and not user.is_superuser and not user.has_usable_password()
    # Under OIDC_GROUP_PREFIX: never a group made in Sourced (test_provider_groups.py).
    assert sorted(user.groups.values_list("name", flat=True)) == ["idp:finance", "idp:hr"]
    assert OidcIdentity.objects.get(user=user).issuer == provider.issuer
    assert client.get("/").status_code == 200  # in the chat, signed in
    assert 0 < client.session.get_expiry_age() <= 8 * 3600


def test_a_group_removed_at_the_provider_is_gone_at_the_next_sign_in(provider):
    provider.user_set("bea", password=PASSWORD, groups=["finance", "legal"])
    sign_in(Client(), provider, "bea")
    user = User.objects.get(username="bea")
    legal = Group.objects.get(name="idp:legal")
    legal_only = collection_create(name="Legal only", groups=[legal])
    contracts = document_create(title="Contracts", texts=["Clause 7."], collection=legal_only)
    assert list(documents_readable(user=user)) == [contracts]
    local = Group.objects.create(name="made-in-sourced")
    user.groups.add(local)
    assert set(user.groups.values_list("name", flat=True)) == {
        "idp:finance",
        "idp:legal",
        "made-in-sourced",
    }

    provider.user_set("bea", password=PASSWORD, groups=["finance"], email="bea@example.org")
    response = sign_in(Client(), provider, "bea")
    assert response.status_code == 302
    user.refresh_from_db()
    # legal, given by the provider, is gone; a group only Sourced gave is left alone.
    assert set(user.groups.values_list("name", flat=True)) == {"idp:finance", "made-in-sourced"}
    assert user.email == "bea@example.org"
    assert User.objects.filter(username__startswith="bea").count() == 1
    # And with the group, the collection it gave: the next request reads without it.
    assert not documents_readable(user=user).exists()


def test_groups_only_in_the_userinfo_response_are_read_there(provider, settings):
    settings.OIDC_STAFF_GROUPS = ["sourced-users"]
    provider.user_set("jo", password=PASSWORD, groups=["sourced-users", "legal"])
    provider.misbehave("groups-in-userinfo")
    response = sign_in(Client(), provider, "jo")
    assert response.status_code == 302
    groups = User.objects.get(username="jo").groups.values_list("name", flat=True)
    assert sorted(groups) == ["idp:legal", "idp:sourced-users"]


def test_someone_outside_the_staff_groups_is_refused_with_no_session(provider, settings):
    settings.OIDC_STAFF_GROUPS = ["sourced-users"]
    provider.user_set("carl", password=PASSWORD, groups=["warehouse"])
    client = Client()
    response = sign_in(client, provider, "carl")
    assert response.status_code == 403
    assert "Your account may not use Sourced" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert not User.objects.filter(username="carl").exists()
    assert client.get("/")["Location"].startswith("/login/")


def test_admin_groups_make_superusers_and_follow_the_provider(provider, settings):
    settings.OIDC_STAFF_GROUPS = ["sourced-users"]
    settings.OIDC_ADMIN_GROUPS = ["sourced-admins"]
    provider.user_set("dora", password=PASSWORD, groups=["sourced-admins"])
    sign_in(Client(), provider, "dora")
    assert User.objects.get(username="dora").is_superuser
    provider.user_set("dora", password=PASSWORD, groups=["sourced-users"])
    sign_in(Client(), provider, "dora")
    dora = User.objects.get(username="dora")
    assert dora.is_staff and not dora.is_superuser


def test_a_taken_username_gets_a_suffix(provider, django_user_model):
    django_user_model.objects.create_user(username="eve", password="local-pass-7731")
    provider.user_set("eve", password=PASSWORD, groups=[])
    sign_in(Client(), provider, "eve")
    assert OidcIdentity.objects.get().user.username == "eve-2"


@pytest.mark.parametrize(
    ("mode", "logged"),
    [
        ("forged", "bad_signature"),
        ("expired", "expired_token"),
        ("audience", "invalid_claim: Invalid claim: 'aud'"),
        ("nonce", "invalid_claim: Invalid claim: 'nonce'"),
    ],
)
def test_an_untrustworthy_id_token_is_refused_and_logged(provider, mode, logged, caplog):
    provider.user_set("finn", password=PASSWORD, groups=["finance"])
    provider.misbehave(mode)
    client = Client()
    with caplog.at_level(logging.WARNING, logger="accounts.oidc"):
        response = sign_in(client, provider, "finn")
    assert response.status_code == 400
    assert "Sign-in failed" in response.content.decode()
    assert "_auth_user_id" not in client.session
    assert not User.objects.filter(username="finn").exists()
    refusals = [r.getMessage() for r in caplog.records if "oidc sign-in refused" in r.getMessage()]
    assert refusals and logged in refusals[0], refusals


def test_a_replayed_state_is_refused(provider, caplog):
    provider.user_set("gus", password=PASSWORD, groups=[])
    client = Client()
    start = client.get("/oidc/login/")
    callback = provider_sign_in(start["Location"], username="gus", password=PASSWORD)
    path = callback.removeprefix("http://testserver")
    assert client.get(path).status_code == 302
    client.post("/logout/")
    with caplog.at_level(logging.WARNING, logger="accounts.oidc"):
        again = client.get(path)
    assert again.status_code == 400
    assert "_auth_user_id" not in client.session
    assert any("mismatching_state" in record.getMessage() for record in caplog.records)

    # Another browser cannot use it either.
    assert Client().get(path).status_code == 400


def test_the_provider_down_says_so_and_the_password_form_still_works(settings, staff_user):
    from tests.support.live_server import free_port

    settings.OIDC_ISSUER = f"http://127.0.0.1:{free_port()}/o"  # nothing listens there
    settings.OIDC_CLIENT_ID = "sourced"
    client = Client()
    page = client.get("/login/").content.decode()
    assert 'id="provider-down"' in page and "cannot be reached right now" in page
    assert 'id="oidc-login"' in page and 'id="password-login"' in page
    response = client.get("/oidc/login/")
    assert response.status_code == 503
    body = response.content.decode()
    assert "sign in with your password" in body and 'id="password-login"' in body
    signed_in = client.post("/login/", {"username": "staff", "password": "staff-pass-123"})
    assert signed_in.status_code == 302 and signed_in["Location"] == "/"


def test_password_login_off_hides_the_form_and_refuses_a_password(provider, settings, staff_user):
    settings.PASSWORD_LOGIN = False
    client = Client()
    page = client.get("/login/").content.decode()
    assert 'id="provider-down"' not in page
    assert 'id="oidc-login"' in page and "Sign in with your organisation" in page
    assert 'id="password-login"' not in page and 'name="password"' not in page
    response = client.post("/login/", {"username": "staff", "password": "staff-pass-123"})
    assert response.status_code == 403 and "_auth_user_id" not in client.session


def test_logout_ends_the_session_and_the_providers(provider):
    provider.user_set("hal", password=PASSWORD, groups=[])
    client = Client()
    sign_in(client, provider, "hal")
    response = client.post("/logout/")
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == provider.issuer + "/logout/"
    query = parse_qs(location.query)
    assert query["post_logout_redirect_uri"] == ["http://testserver/login/"]
    assert query["id_token_hint"][0].count(".") == 2
    assert "_auth_user_id" not in client.session
    # The provider ends its own session and sends the browser back to Sourced's login page.
    back = requests.get(response["Location"], allow_redirects=False, timeout=30)
    assert back.status_code == 302 and back.headers["Location"].startswith(
        "http://testserver/login/"
    ), back.text[:500]


def test_a_provider_session_lasts_oidc_session_max_age(provider, settings):
    settings.OIDC_SESSION_MAX_AGE = 600
    provider.user_set("ivy", password=PASSWORD, groups=[])
    client = Client()
    sign_in(client, provider, "ivy")
    assert 590 < client.session.get_expiry_age() <= 600
    assert client.session.get_expire_at_browser_close() is False


def test_the_client_secret_goes_where_the_providers_metadata_says(settings):
    from accounts import oidc

    settings.OIDC_ISSUER = "http://127.0.0.1:9/post-only"
    settings.OIDC_CLIENT_ID = "sourced"
    client = oidc.oidc_client()
    oidc._auth_method_choose(client, {})
    assert "token_endpoint_auth_method" not in client.client_kwargs  # Basic, the default
    oidc._auth_method_choose(
        client, {"token_endpoint_auth_methods_supported": ["private_key_jwt", "client_secret_post"]}
    )
    assert client.client_kwargs["token_endpoint_auth_method"] == "client_secret_post"
