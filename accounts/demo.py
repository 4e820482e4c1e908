"""The demo logins `make run` creates (`manage.py demo_setup`): their passwords are public
(README), so they exist only on a server that is local by every measure, and are disabled
anywhere else. Why and how: docs/decisions/0136-demo-logins-only-on-a-local-server.md."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-pass-2026"
# A second, ordinary staff login outside HR: what the pay bands look like to everyone else.
DEMO2_USERNAME = "demo2"
DEMO2_PASSWORD = "demo2-pass-2026"
DEMO_LOGINS = ((DEMO_USERNAME, DEMO_PASSWORD), (DEMO2_USERNAME, DEMO2_PASSWORD))

# Django's test client's host name: reachable from nowhere but this process.
_LOCAL_NAMES = {"localhost", "testserver"}


def host_is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 in brackets or not) is this machine only:
    a loopback address, `localhost` or a name under `.localhost`, or Django's `testserver`.
    A wildcard (`*`, `.example.org`) is not."""
    host = host.strip().strip("[]").lower().rstrip(".")
    if host in _LOCAL_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_local_refusal(*, host: str | None = None) -> str:
    """Why this server is not local by every measure, or "" when it is: `DJANGO_SECURE` off,
    every allowed host (`DJANGO_ALLOWED_HOSTS`) a loopback name, and `host` (the address it
    listens on, when known) a loopback address."""
    if settings.SECURE:
        return "DJANGO_SECURE is on"
    public = [name for name in settings.ALLOWED_HOSTS if not host_is_loopback(name)]
    if public:
        return f"DJANGO_ALLOWED_HOSTS names {', '.join(public)}"
    if host is not None and not host_is_loopback(host):
        return f"it listens on {host}"
    return ""


def demo_logins_public() -> list[str]:
    """The demo logins that still hold their public password (none when the user table is
    not there yet)."""
    try:
        users = list(
            get_user_model().objects.filter(username__in=[name for name, _ in DEMO_LOGINS])
        )
    except DatabaseError:
        return []
    passwords = dict(DEMO_LOGINS)
    return sorted(
        user.get_username()
        for user in users
        if user.has_usable_password() and user.check_password(passwords[user.get_username()])
    )


def demo_logins_disable() -> list[str]:
    """Remove the password of every demo login that still holds its public one (they can no
    longer log in; an administrator may set a new password); the usernames disabled."""
    disabled = demo_logins_public()
    for user in get_user_model().objects.filter(username__in=disabled):
        user.set_unusable_password()
        user.save(update_fields=["password"])
    return disabled
