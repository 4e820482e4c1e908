"""`manage.py demo_setup`: the demo logins and the demo knowledge base, once (run by `make run`).

The knowledge base: `demo/` in General, readable by all staff, and `demo/hr-only/` in the "HR
only" collection, readable by the "HR" group only (the pay bands). The logins: `demo`, an
administrator in HR, and `demo2`, staff outside HR, so that the same question ("What is the
salary band for a Grade 7 analyst?") is answered for one and refused for the other. Their
passwords are public (README), so they exist only on a server local by every measure
(`accounts.demo.server_local_refusal`: DJANGO_SECURE off, every allowed host and `--host` a
loopback name); otherwise they are not created, and ones already made are locked."""

from __future__ import annotations

import sys
import time
from argparse import ArgumentParser
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from accounts.demo import (
    DEMO2_PASSWORD,
    DEMO2_USERNAME,
    DEMO_PASSWORD,
    DEMO_USERNAME,
    demo_logins_disable,
    server_local_refusal,
)
from knowledge.collections import collection_create
from knowledge.models import Collection, Document
from knowledge.services.ingest import documents_ingest
from knowledge.services.paths import paths_expand

DEMO_DIR = settings.BASE_DIR / "demo"
HR_GROUP = "HR"
HR_COLLECTION = "HR only"
HR_DIR_NAME = "hr-only"  # the demo folder's sub-folder ingested into HR_COLLECTION


class Command(BaseCommand):
    help = (
        f"Create the demo logins '{DEMO_USERNAME}' (an administrator in the {HR_GROUP} group) "
        f"and '{DEMO2_USERNAME}' (staff outside it) if no users of those names exist and "
        "the server is local (--host and every DJANGO_ALLOWED_HOSTS a loopback name, "
        "DJANGO_SECURE off), and ingest the demo knowledge base (demo/, its "
        f"{HR_DIR_NAME}/ folder into the '{HR_COLLECTION}' collection readable by "
        f"{HR_GROUP} only) if the knowledge base has no documents. Safe to run again: it only "
        "does what is missing."
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
            "loopback address (or DJANGO_ALLOWED_HOSTS not all loopback names, or "
            "DJANGO_SECURE on): the demo logins are not created, and existing ones' "
            "well-known passwords are removed.",
        )

    def handle(self, *args, demo_dir: Path, host: str, **options) -> None:
        hr = self._hr_ensure()
        refusal = server_local_refusal(host=host)
        if not refusal:
            self._user_ensure(hr)
        else:
            self._user_refuse(refusal)
        self._documents_ensure(demo_dir)

    def _hr_ensure(self) -> Group:
        """The HR group and the "HR only" collection it reads (created when missing)."""
        group, _ = Group.objects.get_or_create(name=HR_GROUP)
        if not Collection.objects.filter(name__iexact=HR_COLLECTION).exists():
            collection_create(name=HR_COLLECTION, groups=[group])
        return group

    def _user_refuse(self, refusal: str) -> None:
        done = "The demo logins are not created"
        if demo_logins_disable():
            done = "The demo logins can no longer log in (their passwords were removed)"
        self.stderr.write(
            self.style.WARNING(
                f"Not a local server ({refusal}): {done}, since their passwords are public. "
                "Create an administrator with your own password instead:\n"
                "  .venv/bin/python manage.py createsuperuser"
            )
        )

    def _user_ensure(self, hr: Group) -> None:
        user_model = get_user_model()
        if user_model.objects.filter(username=DEMO_USERNAME).exists():
            self.stdout.write(f"Demo user '{DEMO_USERNAME}' already exists (left unchanged).")
        else:
            user = user_model.objects.create_superuser(
                username=DEMO_USERNAME,
                email="demo@northwind-analytics.example",
                password=DEMO_PASSWORD,
            )
            user.groups.add(hr)
            self.stdout.write(
                self.style.SUCCESS(
                    f"Created the demo staff user. Log in as {DEMO_USERNAME} / {DEMO_PASSWORD}"
                    f" (in {HR_GROUP}: reads the '{HR_COLLECTION}' collection)"
                )
            )
        if user_model.objects.filter(username=DEMO2_USERNAME).exists():
            self.stdout.write(f"Demo user '{DEMO2_USERNAME}' already exists (left unchanged).")
            return
        user_model.objects.create_user(
            username=DEMO2_USERNAME,
            email="demo2@northwind-analytics.example",
            password=DEMO2_PASSWORD,
            is_staff=True,
        )
        self.stdout.write(
            self.style.SUCCESS(
                f"Created a second login outside {HR_GROUP}: {DEMO2_USERNAME} / {DEMO2_PASSWORD}"
                f" (ask both: What is the salary band for a Grade 7 analyst?)"
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
        hr_dir = demo_dir / HR_DIR_NAME
        restricted = [file for file in files if file.is_relative_to(hr_dir)]
        general = [file for file in files if not file.is_relative_to(hr_dir)]

        self.stdout.write(f"Ingesting {len(files)} demo document(s) from {demo_dir} ...")
        started = time.monotonic()
        outcomes = []
        with tqdm(total=len(files), unit="file", file=sys.stderr, leave=False) as bar:
            for paths, collection in (
                (general, None),
                (restricted, Collection.objects.get(name__iexact=HR_COLLECTION)),
            ):
                if paths:
                    outcomes += documents_ingest(
                        paths=paths,
                        title=None,
                        enabled=True,
                        dry_run=False,
                        progress=bar.update,
                        collection=collection,
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
