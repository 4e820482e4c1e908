"""`manage.py sync SOURCE`: mirror a folder, a web site or a WebDAV share into the knowledge
base (knowledge/services/sync.py, knowledge/sources/)."""

from __future__ import annotations

import sys
import time

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from knowledge.collections import collection_default
from knowledge.models import Collection, Source
from knowledge.parsers import SUPPORTED_TYPES_LABEL
from knowledge.services.sync import SyncError, SyncPlan, SyncReport
from knowledge.sources.locations import LocationError
from knowledge.sources.remote import RemotePlan
from knowledge.sources.services import location_root, location_sync
from knowledge.sources.web import site_files_label


class Command(BaseCommand):
    help = (
        "Mirror a source into the knowledge base: a folder (a path, walked recursively), a web "
        "site (an http:// or https:// start URL: the pages under its path, robots.txt obeyed) "
        "or a WebDAV share (webdav://host/path/ over http, webdavs://host/path/ over https). "
        "New files and pages are ingested, changed ones re-read, moved ones followed, and the "
        "documents of those that left deleted. Documents that came from anywhere else "
        "(uploaded, ingested by hand, another source) are never touched. Supported types: "
        f"{SUPPORTED_TYPES_LABEL} (from a site: its pages and {site_files_label()}); other "
        "files are skipped. Exit status 1 when any file or page failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", metavar="SOURCE")
        parser.add_argument(
            "--collection",
            metavar="NAME",
            help="Create new documents in the collection NAME (default: the source's "
            "collection when SOURCE is one in the admin, else General); synced documents keep "
            "theirs.",
        )
        parser.add_argument(
            "--credentials-env",
            metavar="VARIABLE",
            default="",
            help="A site or share: the environment variable holding its credentials, "
            "user:password (basic) or Bearer TOKEN (default: the admin source's own).",
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="List what the sync would add, update, move, remove and skip; write nothing "
            "(files are compared by hash, not parsed).",
        )
        parser.add_argument(
            "--allow-empty",
            action="store_true",
            help="Sync a source that holds no file at all (every document from it is removed); "
            "without it such a sync is refused, as an unmounted share looks the same.",
        )

    def handle(
        self,
        *args,
        source: str,
        collection: str | None,
        credentials_env: str,
        dry_run: bool,
        allow_empty: bool,
        **options,
    ) -> None:
        try:
            root = location_root(source)
        except LocationError as exc:
            raise CommandError(str(exc)) from exc
        known = Source.objects.select_related("collection").filter(location=root).first()
        if known is not None and credentials_env and credentials_env != known.credentials_env:
            held = known.credentials_env or "no variable"
            raise CommandError(
                f"{root} is a source whose credentials are in {held}; leave out --credentials-env."
            )
        target = self._collection(collection, known)
        started = time.monotonic()
        try:
            with tqdm(unit="file", desc="Syncing", file=sys.stderr, leave=False) as bar:
                report = location_sync(
                    location=root,
                    collection=target,
                    dry_run=dry_run,
                    allow_empty=allow_empty,
                    source=known,
                    credentials_env=credentials_env,
                    progress=bar.update,
                )
        except SyncError as exc:
            raise CommandError(str(exc)) from exc
        seconds = time.monotonic() - started
        if dry_run:
            self._dry_run_report(report.plan)
        else:
            self._report(report, seconds=seconds)

    def _collection(self, name: str | None, known: Source | None) -> Collection:
        if name is None:
            return known.collection if known is not None else collection_default()
        target = Collection.objects.filter(name__iexact=name.strip()).first()
        if target is None:
            raise CommandError(f"No collection is named “{name}”.")
        if known is not None and known.collection_id != target.pk:
            raise CommandError(
                f"{known.location} is a source whose documents go to "
                f"“{known.collection.name}”; leave out --collection or name that collection."
            )
        return target

    def _dry_run_report(self, plan: SyncPlan | RemotePlan) -> None:
        for file in plan.new:
            self.stdout.write(f"add     {file}")
        for file in plan.changed:
            self.stdout.write(f"update  {file}")
        for document, file in plan.moved:
            self.stdout.write(f"move    {document.source} -> {file}")
        for document in plan.gone:
            self.stdout.write(f"remove  {document.source} (document {document.pk})")
        for file in plan.not_owned:
            self.stdout.write(f"skip    {file} (its document did not come from this source)")
        for file in plan.unsupported:
            self.stdout.write(f"skip    {file} (unsupported type)")
        for file in plan.links:
            self.stdout.write(f"skip    {file} (a symbolic link: links are not followed)")
        for file, error in plan.unreadable:
            self.stdout.write(f"fail    {file}: {error}")
        for line in getattr(plan, "log", []):
            self.stdout.write(f"note    {line}")
        self.stdout.write(
            self.style.SUCCESS(
                f"Would add {len(plan.new)}, update {len(plan.changed)}, move "
                f"{len(plan.moved)}, remove {len(plan.gone)}; {plan.unchanged} unchanged, "
                f"{len(plan.not_owned) + len(plan.unsupported) + len(plan.links)} skipped. "
                "Dry run: nothing was written."
            )
        )

    def _report(self, report: SyncReport, *, seconds: float) -> None:
        line = (
            f"Synced {report.plan.root} in {seconds:.1f} s: {report.added} added, "
            f"{report.updated} updated, {report.moved} moved, {report.removed} removed, "
            f"{report.plan.unchanged} unchanged, {len(report.failed)} failed, "
            f"{report.skipped} skipped."
        )
        style = self.style.ERROR if report.failed else self.style.SUCCESS
        self.stdout.write(style(line))
        if report.plan.not_owned:
            self.stdout.write("Skipped (their documents did not come from this source):")
            for file in report.plan.not_owned:
                self.stdout.write(f"  {file}")
        if report.plan.unsupported:
            self.stdout.write(f"Skipped (unsupported types): {len(report.plan.unsupported)}")
            for file in report.plan.unsupported:
                self.stdout.write(f"  {file}")
        if report.plan.links:
            self.stdout.write("Skipped (symbolic links are not followed):")
            for file in report.plan.links:
                self.stdout.write(f"  {file}")
        for line in getattr(report.plan, "log", []):
            self.stdout.write(f"Note: {line}")
        if report.failed:
            self.stdout.write("Failed:")
            for source, error in report.failed:
                self.stdout.write(f"  {source}: {error}")
            raise CommandError(f"{len(report.failed)} file(s) failed.", returncode=1)
