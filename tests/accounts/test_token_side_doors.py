"""No plaintext API tokens: DRF's token model is not in the admin, `drf_create_token` is
refused, and `manage.py api_token_create` makes a hashed token whose key it prints once."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.authtoken.models import Token

from accounts.models import ApiToken
from accounts.services import api_key_hash

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client_of(django_user_model):
    superuser = django_user_model.objects.create_superuser(username="root", password="root-pw-77")
    client = Client()
    client.force_login(superuser)
    return client


def test_drf_tokens_are_not_in_the_admin(admin_client_of, staff_user):
    for url in ("/admin/authtoken/tokenproxy/", "/admin/authtoken/tokenproxy/add/"):
        assert admin_client_of.get(url).status_code == 404, url
    response = admin_client_of.post("/admin/authtoken/tokenproxy/add/", {"user": staff_user.pk})
    assert response.status_code == 404
    assert not Token.objects.exists()
    assert "authtoken" not in admin_client_of.get("/admin/").content.decode()


def test_an_api_token_is_not_made_in_the_admin(admin_client_of, staff_user):
    assert admin_client_of.get("/admin/accounts/apitoken/add/").status_code == 403
    assert admin_client_of.get("/admin/accounts/apitoken/").status_code == 200


def test_api_token_create_prints_the_key_once_and_stores_its_hash(staff_user):
    out, err = io.StringIO(), io.StringIO()
    call_command("api_token_create", "staff", "--name", "nightly export", stdout=out, stderr=err)
    key = out.getvalue().strip()
    token = ApiToken.objects.get(user=staff_user)
    assert token.name == "nightly export" and token.key_hash == api_key_hash(key)
    assert key.startswith("src_") and key not in err.getvalue()
    response = Client().get("/api/conversations", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 200


def test_api_token_create_refuses_an_unknown_or_non_staff_user(django_user_model):
    django_user_model.objects.create_user(username="visitor", password="pw-88231907")
    for username in ("nobody", "visitor"):
        with pytest.raises(CommandError):
            call_command("api_token_create", username, stdout=io.StringIO())
    assert not ApiToken.objects.exists()


def test_drf_create_token_is_refused(staff_user):
    with pytest.raises(CommandError, match="api_token_create"):
        call_command("drf_create_token", "staff", stdout=io.StringIO())
    assert not Token.objects.exists()
