"""`make run`'s demo login (demo / a password printed in the README) exists only on a server
that is local by every measure (`--host`, DJANGO_ALLOWED_HOSTS, DJANGO_SECURE): `demo_setup`
elsewhere neither creates nor keeps it, bin/serve disables it at start (`demo_logins_lock`),
and `check --deploy` warns while one holds its public password."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection

from accounts.demo import (
    DEMO2_PASSWORD,
    DEMO2_USERNAME,
    DEMO_PASSWORD,
    DEMO_USERNAME,
    host_is_loopback,
)
from knowledge.models import Document
from tests.support.live_server import TEST_SETTINGS, database_url_of, free_port

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _knowledge_base_not_empty():
    """A document, so that demo_setup does not ingest the demo folder (slow, not tested here)."""
    Document.objects.create(
        title="Existing", source="test:existing", media_type="text/plain", content_hash="0" * 64
    )


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("demo_setup", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "127.0.1.1", "localhost", "::1", "[::1]", "testserver", "a.localhost"]
)
def test_loopback_hosts(host):
    assert host_is_loopback(host)


@pytest.mark.parametrize(
    "host", ["0.0.0.0", "::", "192.168.1.20", "sourced.example.org", "*", ".example.org"]
)
def test_other_hosts(host):
    assert not host_is_loopback(host)


def test_on_loopback_the_demo_login_is_created():
    out, _ = run("--host", "127.0.0.1")
    assert f"Log in as {DEMO_USERNAME} / {DEMO_PASSWORD}" in out
    assert get_user_model().objects.get(username=DEMO_USERNAME).check_password(DEMO_PASSWORD)


def test_on_another_address_it_is_not_created_and_says_how_to_make_an_admin():
    out, err = run("--host", "0.0.0.0")
    assert not get_user_model().objects.filter(username=DEMO_USERNAME).exists()
    assert not get_user_model().objects.filter(username=DEMO2_USERNAME).exists()
    assert DEMO_PASSWORD not in out + err and DEMO2_PASSWORD not in out + err
    assert "Not a local server (it listens on 0.0.0.0)" in err
    assert "manage.py createsuperuser" in err


def test_on_another_address_an_existing_demo_password_is_removed():
    run("--host", "127.0.0.1")
    _, err = run("--host", "10.0.0.5")
    user = get_user_model().objects.get(username=DEMO_USERNAME)
    assert not user.check_password(DEMO_PASSWORD) and not user.has_usable_password()
    second = get_user_model().objects.get(username=DEMO2_USERNAME)
    assert not second.check_password(DEMO2_PASSWORD) and not second.has_usable_password()
    assert "can no longer log in" in err and "manage.py createsuperuser" in err


def test_make_run_passes_host_to_demo_setup():
    command = ["make", "-n", "run", "HOST=0.0.0.0"]
    plan = subprocess.run(command, cwd=settings.BASE_DIR, capture_output=True, text=True).stdout
    assert 'manage.py demo_setup --host "0.0.0.0"' in plan
    plan = subprocess.run(command[:3], cwd=settings.BASE_DIR, capture_output=True, text=True).stdout
    assert 'manage.py demo_setup --host "127.0.0.1"' in plan


def demo_logins_usable() -> dict[str, bool]:
    users = get_user_model().objects.filter(username__in=[DEMO_USERNAME, DEMO2_USERNAME])
    passwords = {DEMO_USERNAME: DEMO_PASSWORD, DEMO2_USERNAME: DEMO2_PASSWORD}
    return {user.username: user.check_password(passwords[user.username]) for user in users}


@pytest.mark.parametrize(
    ("setting", "value", "reason"),
    [
        (
            "ALLOWED_HOSTS",
            ["sourced.example.org"],
            "DJANGO_ALLOWED_HOSTS names sourced.example.org",
        ),
        ("ALLOWED_HOSTS", ["localhost", "*"], "DJANGO_ALLOWED_HOSTS names *"),
        ("SECURE", True, "DJANGO_SECURE is on"),
    ],
)
def test_make_runs_demo_setup_on_loopback_behind_a_public_name_creates_no_demo_login(
    settings, setting, value, reason
):
    """The layout behind nginx: HOST is 127.0.0.1, the public name is an allowed host."""
    setattr(settings, setting, value)
    out, err = run("--host", "127.0.0.1")
    assert demo_logins_usable() == {}
    assert DEMO_PASSWORD not in out + err
    assert f"Not a local server ({reason})" in err


def test_make_runs_demo_setup_behind_a_public_name_disables_an_existing_demo_login(settings):
    run("--host", "127.0.0.1")
    assert demo_logins_usable() == {DEMO_USERNAME: True, DEMO2_USERNAME: True}
    settings.ALLOWED_HOSTS = ["sourced.example.org"]

    _, err = run("--host", "127.0.0.1")

    assert demo_logins_usable() == {DEMO_USERNAME: False, DEMO2_USERNAME: False}
    assert "can no longer log in" in err


def test_the_start_up_lock_disables_the_demo_logins_on_a_server_that_is_not_local(settings):
    run("--host", "127.0.0.1")
    lock = StringIO()
    call_command("demo_logins_lock", "--host", "127.0.0.1", stderr=lock)
    assert demo_logins_usable() == {DEMO_USERNAME: True, DEMO2_USERNAME: True}  # local: kept
    assert lock.getvalue() == ""

    settings.ALLOWED_HOSTS = ["127.0.0.1", "sourced.example.org"]
    call_command("demo_logins_lock", "--host", "127.0.0.1", stderr=lock)

    assert demo_logins_usable() == {DEMO_USERNAME: False, DEMO2_USERNAME: False}
    assert "DJANGO_ALLOWED_HOSTS names sourced.example.org" in lock.getvalue()
    assert "demo, demo2 can no longer log in" in lock.getvalue()


def test_a_demo_login_changed_to_a_password_of_its_own_is_left_alone(settings):
    run("--host", "127.0.0.1")
    user = get_user_model().objects.get(username=DEMO_USERNAME)
    user.set_password("a-password-of-their-own-2026")
    user.save()
    settings.SECURE = True
    call_command("demo_logins_lock", stderr=StringIO())
    assert (
        get_user_model()
        .objects.get(username=DEMO_USERNAME)
        .check_password("a-password-of-their-own-2026")
    )
    assert demo_logins_usable()[DEMO2_USERNAME] is False


@pytest.mark.django_db(transaction=True)
def test_bin_serve_behind_a_public_name_disables_the_demo_logins_before_it_serves():
    """The real script, as `make run` ends: HOST loopback, a public allowed host."""
    run("--host", "127.0.0.1")
    assert demo_logins_usable() == {DEMO_USERNAME: True, DEMO2_USERNAME: True}
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")},
        "DATABASE_URL": database_url_of(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": TEST_SETTINGS,  # the suite's password hasher
        "DJANGO_ALLOWED_HOSTS": "sourced.example.org",
        "HOST": "127.0.0.1",
        "PORT": str(free_port()),
        "PYTHON": sys.executable,
        "EMBEDDING_WARM_UP": "0",
        "WEB_PROCESSES": "1",
    }
    serve = subprocess.Popen(
        [str(settings.BASE_DIR / "bin" / "serve")],
        cwd=settings.BASE_DIR,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        started = ""
        while "Sourced is running" not in started:  # printed once both are started
            line = serve.stdout.readline()
            assert line, serve.stderr.read()
            started += line
        assert demo_logins_usable() == {DEMO_USERNAME: False, DEMO2_USERNAME: False}
    finally:
        serve.send_signal(signal.SIGTERM)
        _, err = serve.communicate(timeout=60)
    assert "DJANGO_ALLOWED_HOSTS names sourced.example.org" in err


def test_check_deploy_warns_while_a_demo_login_holds_its_public_password(settings):
    from django.core.management import CommandError

    def deploy_check() -> str:
        out, err = StringIO(), StringIO()
        try:
            call_command("check", "--deploy", "--fail-level", "WARNING", stdout=out, stderr=err)
        except CommandError as exc:
            return out.getvalue() + err.getvalue() + str(exc)
        return out.getvalue() + err.getvalue()

    assert "sourced.W001" not in deploy_check()
    run("--host", "127.0.0.1")
    warned = deploy_check()
    assert "sourced.W001" in warned and "demo, demo2 still hold their public password" in warned

    call_command("demo_logins_lock", "--host", "0.0.0.0", stderr=StringIO())
    assert "sourced.W001" not in deploy_check()
