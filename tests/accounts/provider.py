"""The test OpenID provider (tests/oidc_provider/: django-oauth-toolkit, RS256) run in a
subprocess on a free loopback port, with its own SQLite database and an RSA key generated for
the run. Its users, groups and misbehaviour are set by running its management commands."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.live_server import BASE_DIR, free_port, process_serving

CLIENT_ID = "sourced-tests"


@dataclass
class Provider:
    url: str
    issuer: str
    client_id: str
    client_secret: str
    env: dict
    mischief_file: Path

    def manage(self, *args: str) -> None:
        """Run one of the provider's management commands (raises on failure)."""
        subprocess.run(
            [sys.executable, "-m", "django", *args],
            cwd=BASE_DIR,
            env=self.env,
            check=True,
            capture_output=True,
            timeout=120,
        )

    def user_set(self, username: str, *, password: str, groups: list[str], **fields: str) -> None:
        """Create or update a provider user with exactly `groups`."""
        extra = [f"--{name.replace('_', '-')}={value}" for name, value in fields.items()]
        self.manage(
            "provider_user", username, f"--password={password}", f"--groups={','.join(groups)}",
            *extra,
        )  # fmt: skip

    def client_register(self, *redirect_uris: str, post_logout: tuple[str, ...] = ()) -> None:
        self.manage(
            "provider_client",
            f"--client-id={self.client_id}",
            f"--client-secret={self.client_secret}",
            *[f"--redirect-uri={uri}" for uri in redirect_uris],
            *[f"--post-logout-redirect-uri={uri}" for uri in post_logout],
        )

    def misbehave(self, mode: str) -> None:
        """The next ID tokens: `expired`, `audience`, `nonce`, `forged`, `groups-in-userinfo`,
        or "" (honest)."""
        self.mischief_file.write_text(mode)


@contextmanager
def provider_running(workdir: Path) -> Iterator[Provider]:
    """Start the provider until the block ends."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file = workdir / "provider-key.pem"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    provider = Provider(
        url=url,
        issuer=f"{url}/o",
        client_id=CLIENT_ID,
        client_secret=secrets.token_urlsafe(32),
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "tests.oidc_provider.settings",
            "PROVIDER_SECRET_KEY": secrets.token_urlsafe(50),
            "PROVIDER_DATABASE": str(workdir / "provider.sqlite3"),
            "PROVIDER_KEY_FILE": str(key_file),
            "PROVIDER_ISSUER": f"{url}/o",
            "PROVIDER_MISCHIEF_FILE": str(workdir / "mischief"),
            "PYTHONUNBUFFERED": "1",
        },
        mischief_file=workdir / "mischief",
    )
    provider.manage("migrate", "--noinput")
    command = [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{port}", "--noreload"]
    with process_serving(command, port=port, env=provider.env, name="oidc-provider", timeout=60):
        yield provider


def provider_sign_in(authorize_url: str, *, username: str, password: str) -> str:
    """Sign in at the provider's own login page as a browser would, starting from the
    authorization URL Sourced redirected to; the URL the provider sends the browser back to
    (Sourced's callback, with code and state)."""
    with requests.Session() as browser:
        page = browser.get(authorize_url, timeout=30)
        page.raise_for_status()
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
        assert token, page.text
        form_next = re.search(r'name="next" value="([^"]*)"', page.text)
        answer = browser.post(
            page.url,
            data={
                "csrfmiddlewaretoken": token.group(1),
                "username": username,
                "password": password,
                "next": form_next.group(1).replace("&amp;", "&") if form_next else "",
            },
            headers={"Referer": page.url},
            allow_redirects=False,
            timeout=30,
        )
        # The login redirects to the authorization endpoint, which redirects to Sourced.
        while answer.status_code in (301, 302, 303):
            location = urljoin(answer.url, answer.headers["Location"])
            if not location.startswith(authorize_url.split("/o/")[0]):
                return location
            answer = browser.get(location, allow_redirects=False, timeout=30)
        raise AssertionError(f"the provider did not send the browser back: {answer.status_code}")
