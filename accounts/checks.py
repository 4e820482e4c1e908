"""System checks of sign-in, run by `manage.py check --deploy`."""

from __future__ import annotations

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
