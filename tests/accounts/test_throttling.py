"""Password logins that resist guessing: django-axes' lockout after 5 failures within 15
minutes of one username from one address, on /login/ and /admin/login/, and its end; behind
TRUSTED_PROXY_COUNT proxies the address is the client's as the proxy set it in
X-Forwarded-For (docs/decisions/0067-login-throttling.md)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

pytestmark = pytest.mark.django_db


def fail(client: Client, path: str, username: str, address: str = "10.1.1.1", times: int = 1):
    for _ in range(times):
        response = client.post(
            path, {"username": username, "password": "wrong-guess"}, REMOTE_ADDR=address
        )
    return response


def test_five_failures_lock_the_username_from_that_address_then_the_lockout_ends(staff_user):
    client = Client()
    assert fail(client, "/login/", "staff", times=4).status_code == 200
    locked = fail(client, "/login/", "staff")
    assert locked.status_code == 429
    assert "Too many failed sign-in attempts. Try again in 15 minutes." in locked.content.decode()
    # The right password is refused too from that address; from another one it is accepted.
    right = {"username": "staff", "password": "staff-pass-123"}
    response = client.post("/login/", right, REMOTE_ADDR="10.1.1.1")
    assert response.status_code == 429 and "_auth_user_id" not in client.session
    elsewhere = Client()
    assert elsewhere.post("/login/", right, REMOTE_ADDR="10.9.9.9").status_code == 302

    # Ten minutes later: five left.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=10))
    page = client.post("/login/", right, REMOTE_ADDR="10.1.1.1").content.decode()
    assert "Try again in 5 minutes." in page

    # Fifteen minutes after the last failure the lockout has ended.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=15, seconds=1))
    response = client.post("/login/", right, REMOTE_ADDR="10.1.1.1")
    assert response.status_code == 302 and response["Location"] == "/"


def test_five_failures_of_one_user_do_not_lock_another_user_at_the_same_address(staff_user):
    """An office behind one NAT address: one person's typos lock only themselves."""
    client = Client()
    fail(client, "/login/", "someone-else", address="10.2.2.2", times=5)
    assert fail(client, "/login/", "someone-else", address="10.2.2.2").status_code == 429
    response = client.post(
        "/login/", {"username": "staff", "password": "staff-pass-123"}, REMOTE_ADDR="10.2.2.2"
    )
    assert response.status_code == 302


def test_the_admin_login_is_throttled_too(staff_user):
    client = Client()
    fail(client, "/admin/login/", "staff", times=5)
    response = client.post(
        "/admin/login/", {"username": "staff", "password": "staff-pass-123"}, REMOTE_ADDR="10.1.1.1"
    )
    assert response.status_code == 429
    assert "Try again in 15 minutes" in response.content.decode()


def test_failures_older_than_fifteen_minutes_do_not_count(staff_user):
    client = Client()
    fail(client, "/login/", "staff", times=4)
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert fail(client, "/login/", "staff").status_code == 200
    assert fail(client, "/login/", "staff").status_code == 200


def test_the_test_clients_login_is_not_throttled(staff_user):
    client = Client()
    for _ in range(8):
        assert not client.login(username="staff", password="wrong-guess")
    assert client.login(username="staff", password="staff-pass-123")


@pytest.mark.parametrize(
    ("password", "problem"),
    [
        ("short1!", "too short"),
        ("password123", "too common"),
        ("83917465028", "entirely numeric"),
        ("staffmember-x", "too similar"),
    ],
)
def test_djangos_four_password_validators(django_user_model, password, problem):
    user = django_user_model(username="staffmember", email="staffmember@example.org")
    with pytest.raises(ValidationError) as error:
        validate_password(password, user)
    assert problem in " ".join(error.value.messages)
    validate_password("correct-horse-battery-9", user)


PROXY = "127.0.0.1"  # nginx on the same machine: every request's REMOTE_ADDR
ATTACKER = "203.0.113.5"


def through_proxy(client: Client, path: str, username: str, password: str, forwarded: str):
    return client.post(
        path,
        {"username": username, "password": password},
        REMOTE_ADDR=PROXY,
        HTTP_X_FORWARDED_FOR=forwarded,
    )


@pytest.mark.parametrize("path", ["/login/", "/admin/login/"])
def test_behind_a_proxy_five_failures_lock_the_attacker_and_nobody_else(
    settings, django_user_model, staff_user, path
):
    settings.TRUSTED_PROXY_COUNT = 1
    django_user_model.objects.create_superuser(username="admin", password="break-glass-2026!")
    attacker = Client()
    for n in range(5):  # what a client writes to the left of the proxy's entry is not trusted
        response = through_proxy(attacker, path, "admin", "wrong", f"10.0.0.{n}, {ATTACKER}")
        assert response.status_code == (429 if n == 4 else 200)  # the fifth failure locks
    refused = through_proxy(attacker, path, "admin", "break-glass-2026!", f"9.9.9.9, {ATTACKER}")
    assert refused.status_code == 429 and "_auth_user_id" not in attacker.session
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {ATTACKER}

    admin = Client()
    signed_in = through_proxy(admin, path, "admin", "break-glass-2026!", "198.51.100.7")
    assert signed_in.status_code == 302 and "_auth_user_id" in admin.session
    staff = Client()
    assert through_proxy(staff, "/login/", "staff", "staff-pass-123", "198.51.100.8").status_code
    assert "_auth_user_id" in staff.session


def test_without_trusted_proxies_a_forwarded_header_is_ignored(staff_user):
    client = Client()
    for n in range(5):
        client.post(
            "/login/",
            {"username": "staff", "password": "wrong"},
            REMOTE_ADDR="10.4.4.4",
            HTTP_X_FORWARDED_FOR=f"10.5.5.{n}",
        )
    response = client.post(
        "/login/",
        {"username": "staff", "password": "staff-pass-123"},
        REMOTE_ADDR="10.4.4.4",
        HTTP_X_FORWARDED_FOR="10.6.6.6",
    )
    assert response.status_code == 429
    assert set(AccessAttempt.objects.values_list("ip_address", flat=True)) == {"10.4.4.4"}


@pytest.mark.parametrize(
    ("count", "forwarded", "expected"),
    [
        (0, "198.51.100.7", "127.0.0.1"),
        (1, "198.51.100.7", "198.51.100.7"),
        (1, "1.2.3.4, 198.51.100.7", "198.51.100.7"),
        (2, "1.2.3.4, 198.51.100.7, 10.0.0.2", "198.51.100.7"),
        (2, "198.51.100.7", "127.0.0.1"),  # fewer entries than proxies
        (1, "not-an-address", "127.0.0.1"),
        (1, "", "127.0.0.1"),
        (1, "2001:db8::1", "2001:db8::1"),
    ],
)
def test_the_client_address_is_the_nth_from_the_right(settings, rf, count, forwarded, expected):
    from accounts.addresses import client_address

    settings.TRUSTED_PROXY_COUNT = count
    request = rf.get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=forwarded)
    assert client_address(request) == expected


def test_check_deploy_warns_when_https_is_on_and_no_proxy_is_trusted(settings):
    from accounts.checks import trusted_proxies_check

    settings.SECURE, settings.TRUSTED_PROXY_COUNT = True, 0
    assert [warning.id for warning in trusted_proxies_check()] == ["sourced.W002"]
    settings.TRUSTED_PROXY_COUNT = 1
    assert trusted_proxies_check() == []
