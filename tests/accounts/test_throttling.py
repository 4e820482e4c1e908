"""Password logins that resist guessing: django-axes' lockout after 5 failures within 15
minutes, per username and per address, on /login/ and /admin/login/, and its end."""

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


def test_five_failures_lock_the_username_then_the_lockout_ends(staff_user):
    client = Client()
    assert fail(client, "/login/", "staff", times=4).status_code == 200
    locked = fail(client, "/login/", "staff")
    assert locked.status_code == 429
    assert "Too many failed sign-in attempts. Try again in 15 minutes." in locked.content.decode()
    # The right password is refused too, from another address as well: the username is locked.
    right = {"username": "staff", "password": "staff-pass-123"}
    for address in ("10.1.1.1", "10.9.9.9"):
        response = client.post("/login/", right, REMOTE_ADDR=address)
        assert response.status_code == 429 and "_auth_user_id" not in client.session

    # Ten minutes later: five left.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=10))
    page = client.post("/login/", right, REMOTE_ADDR="10.9.9.9").content.decode()
    assert "Try again in 5 minutes." in page

    # Fifteen minutes after the last failure the lockout has ended.
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=15, seconds=1))
    response = client.post("/login/", right, REMOTE_ADDR="10.1.1.1")
    assert response.status_code == 302 and response["Location"] == "/"


def test_five_failures_from_one_address_lock_the_address_for_every_username(staff_user):
    client = Client()
    for n in range(5):
        fail(client, "/login/", f"guess-{n}", address="10.2.2.2")
    response = client.post(
        "/login/", {"username": "staff", "password": "staff-pass-123"}, REMOTE_ADDR="10.2.2.2"
    )
    assert response.status_code == 429 and "_auth_user_id" not in client.session
    other = client.post(
        "/login/", {"username": "staff", "password": "staff-pass-123"}, REMOTE_ADDR="10.3.3.3"
    )
    assert other.status_code == 302


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
