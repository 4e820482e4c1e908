"""`manage.py demo_setup`: a demo login and the demo knowledge base, once (run by `make run`).
The demo login's password is public (README), so it exists only while Sourced is served on
loopback: with `--host` another address, it is not created, and one already made is locked."""

from __future__ import annotations

import ipaddress
import sys
import time
from argparse import ArgumentParser
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from knowledge.models import Document
from knowledge.services.ingest import documents_ingest
from knowledge.services.paths import paths_expand

DEMO_USERNAME = "demo"
DEMO_PASSWORD = "demo-pass-2026"
DEMO_DIR = settings.BASE_DIR / "demo"


def host_is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address, IPv6 in brackets or not) is this machine only."""
    host = host.strip().strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Command(BaseCommand):
    help = (
        f"Create the demo staff user '{DEMO_USERNAME}' if no user of that name exists and "
        "--host is a loopback address, and ingest the demo knowledge base (demo/) if the "
        "knowledge base has no documents. Safe to run again: it only does what is missing."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument(
            "--demo-dir",
            type=Path,
            default=DEMO_DIR,
            help="Folder of demo documents (default: the repository's demo/).",
        )
        parser.add_argument(
            "--host",
            default="127.0.0.1",
            help="The address Sourced will be served on (make run passes HOST). Not a "
            "loopback address: the demo login is not created, and an existing one's "
            "well-known password is removed.",
        )

    def handle(self, *args, demo_dir: Path, host: str, **options) -> None:
        if host_is_loopback(host):
            self._user_ensure()
        else:
            self._user_refuse(host)
        self._documents_ensure(demo_dir)

    def _user_refuse(self, host: str) -> None:
        user = get_user_model().objects.filter(username=DEMO_USERNAME).first()
        done = "The demo login is not created"
        if user is not None and user.check_password(DEMO_PASSWORD):
            user.set_unusable_password()
            user.save(update_fields=["password"])
            done = (
                f"The demo login '{DEMO_USERNAME}' can no longer log in (its password was removed)"
            )
        self.stderr.write(
            self.style.WARNING(
                f"Serving on {host}, not on loopback: {done}, since its password is public. "
                "Create an administrator with your own password instead:\n"
                "  .venv/bin/python manage.py createsuperuser"
            )
        )

    def _user_ensure(self) -> None:
        user_model = get_user_model()
        if user_model.objects.filter(username=DEMO_USERNAME).exists():
            self.stdout.write(f"Demo user '{DEMO_USERNAME}' already exists (left unchanged).")
            return
        user_model.objects.create_superuser(
            username=DEMO_USERNAME,
            email="demo@northwind-analytics.example",
            password=DEMO_PASSWORD,
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Created the demo staff user. Log in as {DEMO_USERNAME} / {DEMO_PASSWORD}"
            )
        )

    def _documents_ensure(self, demo_dir: Path) -> None:
        existing = Document.objects.count()
        if existing:
            self.stdout.write(
                f"The knowledge base already has {existing} document(s): demo not ingested."
            )
            return
        if not demo_dir.is_dir():
            raise CommandError(f"Demo folder not found: {demo_dir}")
        files, _skipped = paths_expand([demo_dir])
        if not files:
            raise CommandError(f"No supported documents in {demo_dir}")

        self.stdout.write(f"Ingesting {len(files)} demo document(s) from {demo_dir} ...")
        started = time.monotonic()
        with tqdm(total=len(files), unit="file", file=sys.stderr, leave=False) as bar:
            outcomes = documents_ingest(
                paths=files, title=None, enabled=True, dry_run=False, progress=bar.update
            )
        seconds = time.monotonic() - started
        for outcome in outcomes:
            name = Path(outcome.source).name
            if outcome.action == "failed":
                self.stderr.write(self.style.ERROR(f"  failed  {name}: {outcome.error}"))
            else:
                title = outcome.document.title if outcome.document else name
                self.stdout.write(
                    f"  {outcome.action:<9} {name} ({title}): {outcome.chunks} chunks"
                )
        failed = sum(outcome.action == "failed" for outcome in outcomes)
        chunks = sum(outcome.chunks for outcome in outcomes)
        summary = (
            f"Demo knowledge base: {len(outcomes) - failed} document(s), {chunks} chunks "
            f"in {seconds:.1f} s."
        )
        if failed:
            # The app still runs with the documents that worked; the admin shows the error.
            self.stderr.write(self.style.WARNING(f"{summary} {failed} document(s) failed."))
        else:
            self.stdout.write(self.style.SUCCESS(summary))
