"""Sign-in in a real browser (Debian's Chromium through Playwright) against the test OpenID
provider: the login page's button, the provider's own login page, the chat signed in, and
logout ending both sessions. A screenshot of each step goes to test-artifacts/."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from tests.accounts.provider import Provider
from tests.support.browser import ARTIFACTS
from tests.support.live_server import daphne_server, database_url_of
from tests.ui.conftest import browser  # noqa: F401  (the module's Chromium)

pytestmark = pytest.mark.browser

PASSWORD = "provider-pass-5530"


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, oidc_provider: Provider):
    """Sourced served by daphne, configured to sign in with the test provider."""
    from django.db import connection

    env = {
        "OIDC_ISSUER": oidc_provider.issuer,
        "OIDC_CLIENT_ID": oidc_provider.client_id,
        "OIDC_CLIENT_SECRET": oidc_provider.client_secret,
        "OIDC_STAFF_GROUPS": "sourced-users",
        "OIDC_LOGIN_LABEL": "Sign in with Test Provider",
    }
    try:
        with daphne_server(database_url_of(connection.settings_dict), env=env) as url:
            oidc_provider.client_register(
                "http://testserver/oidc/callback/",
                f"{url}/oidc/callback/",
                post_logout=("http://testserver/login/", f"{url}/login/"),
            )
            oidc_provider.misbehave("")
            oidc_provider.user_set(
                "grace", password=PASSWORD, groups=["sourced-users", "finance"],
                first_name="Grace", last_name="Hopper", email="grace@example.org",
            )  # fmt: skip
            yield url
    finally:
        with django_db_blocker.unblock():
            get_user_model().objects.filter(username="grace").delete()


def test_sign_in_at_the_provider_lands_in_the_chat_and_logout_ends_both(
    browser,  # noqa: F811
    live,
    django_db_blocker,
):
    context = browser.new_context(base_url=live, viewport={"width": 1280, "height": 860})
    errors: list[str] = []
    page = context.new_page()
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on(
        "console",
        lambda m: errors.append(m.text) if "Content Security Policy" in m.text else None,
    )
    try:
        page.goto("/")
        page.wait_for_url("**/login/**")
        page.screenshot(path=str(ARTIFACTS / "sign-in-1-login-page.png"))
        page.get_by_role("link", name="Sign in with Test Provider").click()

        page.wait_for_selector("#provider-username")
        assert page.url.startswith(live.rsplit(":", 1)[0])  # the provider, on loopback
        assert "/accounts/login/" in page.url and live not in page.url
        page.fill("#provider-username", "grace")
        page.fill("#provider-password", PASSWORD)
        page.screenshot(path=str(ARTIFACTS / "sign-in-2-provider-page.png"))
        page.click("#provider-submit")

        page.wait_for_url(f"{live}/")
        page.wait_for_selector("#composer-input")
        assert "Grace Hopper" in page.inner_text("body")
        page.screenshot(path=str(ARTIFACTS / "sign-in-3-chat.png"))
        with django_db_blocker.unblock():
            grace = get_user_model().objects.get(username="grace")
            assert grace.is_staff
            groups = sorted(grace.groups.values_list("name", flat=True))
        assert groups == ["idp:finance", "idp:sourced-users"]

        page.get_by_role("button", name="Account menu").click()
        page.get_by_role("button", name="Log out").click()
        page.wait_for_url(f"{live}/login/**")
        # The provider's session ended too: its button leads to its login page again.
        page.get_by_role("link", name="Sign in with Test Provider").click()
        page.wait_for_selector("#provider-username")
        assert not errors, errors
    finally:
        context.close()
