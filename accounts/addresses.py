"""The address a request came from, as login throttling counts it: behind
`TRUSTED_PROXY_COUNT` reverse proxies, the address the outermost trusted proxy received the
request from. docs/decisions/0067-login-throttling.md."""

from __future__ import annotations

import ipaddress

from django.conf import settings
from django.http import HttpRequest


def client_address(request: HttpRequest) -> str:
    """The client's IP address: `REMOTE_ADDR` with no trusted proxy (`TRUSTED_PROXY_COUNT`
    0); behind N, the Nth address of `X-Forwarded-For` counted from the right, the one the
    outermost trusted proxy appended (each proxy appends the address it received the request
    from; whatever a client wrote to the left is not trusted). `REMOTE_ADDR` when the header
    holds fewer than N addresses (the request did not come through every proxy) or that entry
    is not an IP address."""
    remote = request.META.get("REMOTE_ADDR", "")
    count = settings.TRUSTED_PROXY_COUNT
    if count <= 0:
        return remote
    forwarded = [
        entry.strip()
        for entry in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",")
        if entry.strip()
    ]
    if len(forwarded) < count:
        return remote
    try:
        return str(ipaddress.ip_address(forwarded[-count]))
    except ValueError:
        return remote
