"""`manage.py sync PATH`: mirror a folder into the knowledge base (knowledge/services/sync.py)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from knowledge.collections import collection_default
from knowledge.models import Collection, WatchedFolder
from knowledge.parsers import SUPPORTED_TYPES_LABEL
from knowledge.services.sync import SyncError, SyncPlan, SyncReport, folder_root, folder_sync


class Command(BaseCommand):
    help = (
        "Mirror a folder (walked recursively) into the knowledge base: new files are ingested, "
        "changed files re-read, moved files followed, and the documents of files that left "
        "the folder deleted. Documents that came from anywhere else (uploaded, ingested by "
        f"hand, another folder) are never touched. Supported types: {SUPPORTED_TYPES_LABEL}; "
        "other files are skipped. Exit status 1 when any file failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", type=Path, metavar="PATH")
        parser.add_argument(
            "--collection",
            metavar="NAME",
            help="Create new documents in the collection NAME (default: the watched folder's "
            "collection when PATH is one, else General); synced documents keep theirs.",
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
            help="Sync a folder that holds no file at all (every document from it is removed); "
            "without it such a sync is refused, as an unmounted share looks the same.",
        )

    def handle(
        self,
        *args,
        path: Path,
        collection: str | None,
        dry_run: bool,
        allow_empty: bool,
        **options,
    ) -> None:
        root = folder_root(path)
        watched = WatchedFolder.objects.select_related("collection").filter(path=root).first()
        target = self._collection(collection, watched)
        started = time.monotonic()
        try:
            with tqdm(unit="file", desc="Syncing", file=sys.stderr, leave=False) as bar:
                report = folder_sync(
                    path=root,
                    collection=target,
                    dry_run=dry_run,
                    allow_empty=allow_empty,
                    folder=watched,
                    progress=bar.update,
                )
        except SyncError as exc:
            raise CommandError(str(exc)) from exc
        seconds = time.monotonic() - started
        if dry_run:
            self._dry_run_report(report.plan)
        else:
            self._report(report, seconds=seconds)

    def _collection(self, name: str | None, watched: WatchedFolder | None) -> Collection:
        if name is None:
            return watched.collection if watched is not None else collection_default()
        target = Collection.objects.filter(name__iexact=name.strip()).first()
        if target is None:
            raise CommandError(f"No collection is named “{name}”.")
        if watched is not None and watched.collection_id != target.pk:
            raise CommandError(
                f"{watched.path} is a watched folder whose documents go to "
                f"“{watched.collection.name}”; leave out --collection or name that collection."
            )
        return target

    def _dry_run_report(self, plan: SyncPlan) -> None:
        for file in plan.new:
            self.stdout.write(f"add     {file}")
        for file in plan.changed:
            self.stdout.write(f"update  {file}")
        for document, file in plan.moved:
            self.stdout.write(f"move    {document.source} -> {file}")
        for document in plan.gone:
            self.stdout.write(f"remove  {document.source} (document {document.pk})")
        for file in plan.not_owned:
            self.stdout.write(f"skip    {file} (its document did not come from this folder)")
        for file in plan.unsupported:
            self.stdout.write(f"skip    {file} (unsupported type)")
        for file in plan.links:
            self.stdout.write(f"skip    {file} (a symbolic link: links are not followed)")
        for file, error in plan.unreadable:
            self.stdout.write(f"fail    {file}: {error}")
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
            self.stdout.write("Skipped (their documents did not come from this folder):")
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
        if report.failed:
            self.stdout.write("Failed:")
            for source, error in report.failed:
                self.stdout.write(f"  {source}: {error}")
            raise CommandError(f"{len(report.failed)} file(s) failed.", returncode=1)
