"""`manage.py drf_create_token` (Django REST framework's, which stores its keys in clear) is
refused: `manage.py api_token_create` makes the project's hashed tokens."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Refused: use `manage.py api_token_create USERNAME` (tokens stored hashed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs="*")
        parser.add_argument("-r", "--reset", action="store_true")

    def handle(self, *args, **options) -> None:
        raise CommandError(
            "DRF's tokens are stored in clear and are no longer made: run "
            "`manage.py api_token_create USERNAME` instead (its key is printed once, only its "
            "hash is stored)."
        )
