"""Personal API tokens: each user sees, creates and revokes their own on /account/tokens/;
tokens (theirs and DRF's) expire after API_TOKEN_TTL days with a clear 401."""

from __future__ import annotations

import json
import re
import uuid
from datetime import timedelta

import pytest
from django.test import AsyncClient, Client
from django.utils import timezone
from rest_framework.authtoken.models import Token

from accounts.models import ApiToken, OidcIdentity
from accounts.selectors import TokenInvalid, TokenSignInStale, api_token_user

pytestmark = pytest.mark.django_db


def token_make(client: Client, name: str) -> str:
    page = client.post("/account/tokens/", {"name": name}).content.decode()
    match = re.search(r"data-token-key>([^<]+)<", page)
    assert match, page
    return match.group(1)


def test_a_user_creates_uses_and_revokes_their_own_tokens(staff_user, other_staff_user):
    client = Client()
    client.force_login(staff_user)
    key = token_make(client, "nightly export")
    second = token_make(client, "notebook")
    assert key != second
    assert ApiToken.objects.filter(user=staff_user).count() == 2
    assert key not in "".join(ApiToken.objects.values_list("key_hash", flat=True))

    page = client.get("/account/tokens/").content.decode()
    assert "nightly export" in page and "notebook" in page
    assert key not in page  # shown once, when it is made
    for header in (f"Token {key}", f"Bearer {second}"):
        response = Client().get("/api/conversations", HTTP_AUTHORIZATION=header)
        assert response.status_code == 200

    # Another user neither sees nor revokes them.
    other = Client()
    other.force_login(other_staff_user)
    assert "nightly export" not in other.get("/account/tokens/").content.decode()
    token = ApiToken.objects.get(name="nightly export")
    other.post("/account/tokens/", {"revoke": token.pk})
    assert ApiToken.objects.filter(pk=token.pk).exists()

    client.post("/account/tokens/", {"revoke": token.pk})
    assert not ApiToken.objects.filter(pk=token.pk).exists()
    response = Client().get("/api/conversations", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 401
    assert json.loads(response.content)["error"]["message"] == "Invalid token."


def test_the_token_page_is_for_staff_only(client, django_user_model):
    assert client.get("/account/tokens/")["Location"].startswith("/login/")
    visitor = django_user_model.objects.create_user(username="visitor", password="pw-88231907")
    client.force_login(visitor)
    assert client.get("/account/tokens/").status_code == 403
    assert client.post("/account/tokens/", {"name": "x"}).status_code == 403
    assert not ApiToken.objects.exists()


def test_a_token_expires_after_api_token_ttl_with_a_clear_401(staff_user, settings):
    settings.API_TOKEN_TTL = 30
    client = Client()
    client.force_login(staff_user)
    key = token_make(client, "short-lived")
    token = ApiToken.objects.get()
    assert timedelta(days=29, hours=23) < token.expires - timezone.now() <= timedelta(days=30)
    ApiToken.objects.update(expires=timezone.now() - timedelta(seconds=1))
    response = Client().get("/api/conversations", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 401
    error = json.loads(response.content)["error"]
    assert error["code"] == "unauthorized" and error["message"].startswith("Token expired on ")
    assert "expired" in client.get("/account/tokens/").content.decode()


def test_drf_tokens_expire_too(staff_user, settings):
    settings.API_TOKEN_TTL = 90
    token = Token.objects.create(user=staff_user)
    headers = {"HTTP_AUTHORIZATION": f"Token {token.key}"}
    assert Client().get("/api/conversations", **headers).status_code == 200
    Token.objects.filter(pk=token.pk).update(created=timezone.now() - timedelta(days=91))
    response = Client().get("/api/conversations", **headers)
    assert response.status_code == 401
    assert "Token expired on " in json.loads(response.content)["error"]["message"]


@pytest.mark.django_db(transaction=True)
async def test_an_expired_token_gets_401_from_the_streaming_chat(staff_user):
    from asgiref.sync import sync_to_async

    from accounts.services import api_token_create

    _, key = await sync_to_async(api_token_create)(user=staff_user, name="old")
    await ApiToken.objects.aupdate(expires=timezone.now() - timedelta(days=1))
    response = await AsyncClient().post(
        "/api/chat",
        {"message": "Hi", "message_id": str(uuid.uuid4())},
        "application/json",
        headers={"Authorization": f"Token {key}"},
    )
    assert response.status_code == 401
    assert "Token expired on " in json.loads(response.content)["error"]["message"]


def test_creating_or_revoking_a_token_needs_the_csrf_token(staff_user):
    from accounts.services import api_token_create

    token, _ = api_token_create(user=staff_user, name="kept")
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    assert client.post("/account/tokens/", {"name": "sneaky"}).status_code == 403
    assert client.post("/account/tokens/", {"revoke": token.pk}).status_code == 403
    assert list(ApiToken.objects.values_list("name", flat=True)) == ["kept"]


@pytest.mark.parametrize("kind", ["personal", "drf"])
@pytest.mark.parametrize("at_the_provider", [False, True])
def test_a_token_s_user_is_read_in_one_statement_as_the_orm_reads_them(
    staff_user, kind, at_the_provider, django_assert_num_queries
):
    """Every request with a token looks its user up: one written-out statement
    (docs/decisions/0152), giving the user the ORM gives, every field, and the provider's
    sign-in age still checked (an identity never signed in is refused)."""
    if kind == "personal":
        client = Client()
        client.force_login(staff_user)
        key = token_make(client, "one statement")
    else:
        key = Token.objects.create(user=staff_user).key
    if at_the_provider:
        OidcIdentity.objects.create(
            user=staff_user, issuer="https://idp.example", subject="s", last_sign_in=None
        )
        with django_assert_num_queries(1), pytest.raises(TokenSignInStale):
            api_token_user(key=key)
        OidcIdentity.objects.update(last_sign_in=timezone.now())

    with django_assert_num_queries(1):
        user = api_token_user(key=key)

    expected = type(staff_user).objects.get(pk=staff_user.pk)
    fields = type(staff_user)._meta.concrete_fields
    assert type(user) is type(expected) and not user._state.adding
    assert [f.value_from_object(user) for f in fields] == [
        f.value_from_object(expected) for f in fields
    ]
    with pytest.raises(TokenInvalid):
        api_token_user(key=key[:-1] + ("x" if key[-1] != "x" else "y"))
