"""`make run`'s demo login (demo / a password printed in the README) exists only when Sourced
is served on loopback: `demo_setup --host` elsewhere neither creates nor keeps it."""

from __future__ import annotations

import subprocess
from io import StringIO

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command

from knowledge.management.commands.demo_setup import (
    DEMO2_PASSWORD,
    DEMO2_USERNAME,
    DEMO_PASSWORD,
    DEMO_USERNAME,
    host_is_loopback,
)
from knowledge.models import Document

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


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.1.1", "localhost", "::1", "[::1]"])
def test_loopback_hosts(host):
    assert host_is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "sourced.example.org"])
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
    assert "not on loopback" in err and "manage.py createsuperuser" in err


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
