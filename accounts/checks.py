"""System checks of sign-in, run by `manage.py check --deploy`."""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Tags, Warning, register

from accounts.demo import demo_logins_public


@register(Tags.security, deploy=True)
def demo_logins_check(app_configs=None, **kwargs) -> list[Warning]:
    """sourced.W001: a demo login still holds its public password (README)."""
    public = demo_logins_public()
    if not public:
        return []
    return [
        Warning(
            f"The demo login(s) {', '.join(public)} still hold their public password: anyone "
            "who read the README can sign in.",
            hint="Run `manage.py demo_logins_lock` (bin/serve does it on any server that is "
            "not local), or delete the users.",
            id="sourced.W001",
        )
    ]


@register(Tags.security, deploy=True)
def trusted_proxies_check(app_configs=None, **kwargs) -> list[Warning]:
    """sourced.W002: served over HTTPS (so behind a proxy) while no proxy is trusted."""
    if not settings.SECURE or settings.TRUSTED_PROXY_COUNT > 0:
        return []
    return [
        Warning(
            "DJANGO_SECURE is on (a proxy terminates TLS) but TRUSTED_PROXY_COUNT is 0: login "
            "throttling counts every sign-in attempt as coming from the proxy's address.",
            hint="Set TRUSTED_PROXY_COUNT to the number of proxies that append to "
            "X-Forwarded-For in front of Sourced (1 for one nginx).",
            id="sourced.W002",
        )
    ]
