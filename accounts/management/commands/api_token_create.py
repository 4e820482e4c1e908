"""`manage.py api_token_create USERNAME [--name NAME]`: a personal API token for a user, its key
printed once (only its hash is stored)."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.services import api_token_create
from knowledge.access import user_is_staff


class Command(BaseCommand):
    help = (
        "Create an API token for USERNAME (an active staff user) and print its key, once: only "
        "its SHA-256 is stored. It expires API_TOKEN_TTL days from now and is listed, and can "
        "be revoked, on the user's /account/tokens/ page."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", help="The user the token signs in as.")
        parser.add_argument("--name", default="API token", help="What the token is for.")

    def handle(self, *args, username: str, name: str, **options) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user is called {username!r}.")
        if not user_is_staff(user):
            raise CommandError(f"{username!r} is not an active staff user: the API refuses them.")
        token, key = api_token_create(user=user, name=name)
        self.stderr.write(f"Token {token.name!r} for {username}, expires {token.expires:%Y-%m-%d}:")
        self.stdout.write(key)
