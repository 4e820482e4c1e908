"""`manage.py mcp --token <API token>`: the MCP server over stdio, for desktop assistants that
start a server as a process (Claude Desktop, Cursor). The token is a staff user's API token
(/account/tokens/); it is checked at start and again on every call, so a revoked token or a
user who lost access stops reading at once. Logs go to stderr: stdout is the protocol's."""

from __future__ import annotations

import os
from argparse import ArgumentParser

import anyio
from django.core.management.base import BaseCommand, CommandError

from chat.clients.answers import staff_token_user
from chat.clients.mcp_server import mcp_server, stdio_base_url, stdio_token
from chat.errors import AnswerError


class Command(BaseCommand):
    help = "Serve Sourced's MCP tools (search, ask) and document resources over stdio."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--token",
            default=os.environ.get("SOURCED_TOKEN", ""),
            help="A staff user's API token (default: the SOURCED_TOKEN environment variable).",
        )
        parser.add_argument(
            "--base-url",
            default=os.environ.get("SOURCED_BASE_URL", "http://127.0.0.1:8000"),
            help="Where links to passages point (default http://127.0.0.1:8000).",
        )

    def handle(self, *args, **options) -> None:
        token = options["token"].strip()
        if not token:
            raise CommandError("Give a staff user's API token: --token or SOURCED_TOKEN.")
        try:
            staff_token_user(f"Bearer {token}")
        except AnswerError as error:
            raise CommandError(error.message) from None
        stdio_token.set(token)
        stdio_base_url.set(options["base_url"].rstrip("/") + "/")
        anyio.run(mcp_server.run_stdio_async)
