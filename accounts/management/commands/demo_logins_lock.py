"""`manage.py demo_logins_lock [--host H]`: disable the demo logins on a server that is not
local (run by bin/serve at every start)."""

from __future__ import annotations

from argparse import ArgumentParser

from django.core.management.base import BaseCommand

from accounts.demo import demo_logins_disable, server_local_refusal


class Command(BaseCommand):
    help = (
        "Unless this server is local by every measure (DJANGO_SECURE off, every host of "
        "DJANGO_ALLOWED_HOSTS and --host a loopback name), remove the password of each demo "
        "login that still holds its public one. bin/serve runs it at every start."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--host",
            help="The address the server listens on (bin/serve passes HOST).",
        )

    def handle(self, *args, host: str | None, **options) -> None:
        refusal = server_local_refusal(host=host)
        if not refusal:
            return
        disabled = demo_logins_disable()
        if disabled:
            self.stderr.write(
                self.style.WARNING(
                    f"Not a local server ({refusal}): the demo login(s) {', '.join(disabled)} "
                    "can no longer log in (their public passwords were removed)."
                )
            )
