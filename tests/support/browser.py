"""Debian's Chromium, as the browser tests launch it through Playwright, and where they put
their screenshots. The live server they drive is tests.support.live_server.daphne_server."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = Path(settings.BASE_DIR) / "test-artifacts"
