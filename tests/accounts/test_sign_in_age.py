"""A provider sign-in lasts OIDC_SESSION_MAX_AGE from the sign-in itself, on every surface: the
browser session (nothing but a sign-in renews it), and the API tokens of an account tied to the
provider. Signed in at a real provider (tests/oidc_provider/, as tests/accounts/test_oidc.py)."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.contrib.sessions.models import Session
from django.test import Client
from django.utils import timezone

from accounts.models import OidcIdentity
from knowledge.collections import collection_create
from tests.accounts.test_api_tokens import token_make
from tests.accounts.test_oidc import PASSWORD, sign_in
from tests.support.knowledge_base import document_create

pytestmark = pytest.mark.django_db


def documents_listed(key: str) -> tuple[int, str]:
    response = Client().get("/api/documents", HTTP_AUTHORIZATION=f"Token {key}")
    return response.status_code, response.content.decode()


@pytest.mark.django_db(transaction=True)  # POST /api/chat is async: another thread
def test_a_token_stops_answering_once_the_sign_in_is_older_than_the_max_age(provider, settings):
    settings.OIDC_SESSION_MAX_AGE = 3600
    provider.user_set("kim", password=PASSWORD, groups=["hr"])
    client = Client()
    sign_in(client, provider, "kim")
    hr_only = collection_create(name="HR only", groups=[Group.objects.get(name="idp:hr")])
    document_create(title="Pay bands 2026", texts=["Band C pays 61,000."], collection=hr_only)
    key = token_make(client, "nightly export")
    status, body = documents_listed(key)
    assert status == 200 and "Pay bands 2026" in body

    # The provider takes the group away; the token's owner does not sign in again, and their
    # last sign-in ages past OIDC_SESSION_MAX_AGE.
    provider.user_set("kim", password=PASSWORD, groups=[])
    OidcIdentity.objects.update(last_sign_in=timezone.now() - timedelta(seconds=3601))
    status, body = documents_listed(key)
    assert status == 401, body
    error = json.loads(body)["error"]
    assert error["code"] == "unauthorized" and "sign in to Sourced again" in error["message"]
    assert "Pay bands" not in body
    streamed = Client().post(
        "/api/chat",
        data={"message": "What does band C pay?"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert streamed.status_code == 401
    assert "sign in to Sourced again" in streamed.content.decode()

    # Signing in again brings the token back, with the groups the provider gives now.
    sign_in(Client(), provider, "kim")
    status, body = documents_listed(key)
    assert status == 200 and "Pay bands 2026" not in body


def test_a_password_accounts_token_is_not_tied_to_a_sign_in(staff_user, settings):
    settings.OIDC_SESSION_MAX_AGE = 1
    client = Client()
    client.force_login(staff_user)
    key = token_make(client, "script")
    assert documents_listed(key)[0] == 200


def test_get_oidc_login_no_longer_extends_a_provider_session(provider, settings):
    settings.OIDC_SESSION_MAX_AGE = 4
    provider.user_set("lou", password=PASSWORD, groups=[])
    client = Client()
    sign_in(client, provider, "lou")
    key = client.session.session_key
    ends = Session.objects.get(pk=key).expire_date
    time.sleep(2.2)
    assert client.get("/").status_code == 200
    # Starting a sign-in writes its state to the session: that used to push its end back.
    assert client.get("/oidc/login/").status_code == 302
    assert Session.objects.get(pk=key).expire_date == ends
    time.sleep(2.2)  # past 4 s after the sign-in, less than 4 s after /oidc/login/
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_a_provider_session_older_than_the_max_age_is_signed_out(provider, settings):
    provider.user_set("max", password=PASSWORD, groups=[])
    client = Client()
    sign_in(client, provider, "max")
    key = client.session.session_key
    assert client.get("/").status_code == 200
    # The session's stored end is still ahead; its sign-in is older than the (lowered) age.
    settings.OIDC_SESSION_MAX_AGE = 1
    time.sleep(1.2)
    response = client.get("/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")
    assert not Session.objects.filter(pk=key).exists()


def test_a_password_session_is_not_cut_by_the_provider_age(staff_user, settings):
    settings.OIDC_SESSION_MAX_AGE = 1
    client = Client()
    assert client.post("/login/", {"username": "staff", "password": "staff-pass-123"})
    time.sleep(1.2)
    assert client.get("/").status_code == 200
    assert User.objects.get(username="staff").is_active
