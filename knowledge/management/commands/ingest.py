"""`manage.py ingest PATH [PATH ...]`: put files and directories into the knowledge base."""

from __future__ import annotations

import os
import sys
import time
from datetime import timedelta
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from tqdm import tqdm

from knowledge import embedding
from knowledge.collections import collection_default
from knowledge.models import Collection
from knowledge.parsers import SUPPORTED_TYPES_LABEL, is_supported
from knowledge.services.ingest import documents_ingest
from knowledge.services.paths import paths_expand

MAX_EXPIRY_DAYS = 36_500


class Command(BaseCommand):
    help = (
        "Ingest documents into the knowledge base: files or directories (walked recursively). "
        f"Supported types: {SUPPORTED_TYPES_LABEL}. Unchanged files are skipped, changed files "
        "replace their chunks. Exit status 1 when any file failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", type=Path, metavar="PATH")
        parser.add_argument("--title", help="Document title (only with a single file).")
        parser.add_argument(
            "--disabled", action="store_true", help="Ingest as disabled (never cited)."
        )
        parser.add_argument(
            "--dry-run",
            action="store_true",
            help="Parse and chunk, report what would change, write nothing.",
        )
        parser.add_argument(
            "--collection",
            metavar="NAME",
            help="Create new documents in the collection NAME (default: General, readable by "
            "all staff); documents already ingested keep their collection.",
        )
        parser.add_argument(
            "--expires-in",
            type=float,
            metavar="DAYS",
            help="The documents expire DAYS days from now: never cited after that, deleted "
            "by `purge_expired` (also set on unchanged files, whose rows the search reads are "
            "then written again).",
        )

    def handle(
        self,
        *args,
        paths: list[Path],
        title: str | None,
        disabled: bool,
        dry_run: bool,
        expires_in: float | None = None,
        collection: str | None = None,
        **opts,
    ) -> None:
        missing = [str(path) for path in paths if not path.exists()]
        if missing:
            raise CommandError(f"No such file or directory: {', '.join(missing)}")
        if title is not None and (len(paths) != 1 or paths[0].is_dir()):
            raise CommandError("--title can only be used with a single file.")
        if title is not None and not title.strip():
            raise CommandError("--title must not be blank.")
        target = collection_default()
        if collection is not None:
            target = Collection.objects.filter(name__iexact=collection.strip()).first()
            if target is None:
                raise CommandError(f"No collection is named “{collection}”.")
        expires_at = None
        if expires_in is not None:
            if not (0 < expires_in <= MAX_EXPIRY_DAYS):
                raise CommandError(
                    f"--expires-in must be a number of days above 0 and at most {MAX_EXPIRY_DAYS}."
                )
            expires_at = timezone.now() + timedelta(days=expires_in)

        links: list[Path] = []
        files, skipped = paths_expand(paths, links=links)
        unreadable = [str(file) for file in files if not os.access(file, os.R_OK)]
        unreadable += [str(p) for p in paths if p.is_dir() and not os.access(p, os.R_OK | os.X_OK)]
        if unreadable:
            raise CommandError(f"Cannot read: {', '.join(unreadable)}")
        if not files:
            raise CommandError(
                f"No supported documents found ({len(skipped)} file(s) of other types skipped). "
                f"Supported types: {SUPPORTED_TYPES_LABEL}."
            )

        if not dry_run and any(is_supported(file.name) for file in files):
            # Loaded up front so the timing below measures ingestion, not the model's start-up.
            started = time.monotonic()
            embedding.get_model()
            self.stdout.write(f"Embedding model ready ({time.monotonic() - started:.1f} s).")

        started = time.monotonic()
        with tqdm(
            total=len(files), unit="file", desc="Ingesting", file=sys.stderr, leave=False
        ) as bar:
            outcomes = documents_ingest(
                paths=files,
                title=title.strip() if title else None,
                enabled=not disabled,
                dry_run=dry_run,
                progress=bar.update,
                expires_at=expires_at,
                collection=target,
            )
        seconds = time.monotonic() - started
        self._report(outcomes, skipped=len(skipped), links=links, seconds=seconds, dry_run=dry_run)

    def _report(
        self, outcomes, *, skipped: int, links: list[Path], seconds: float, dry_run: bool
    ) -> None:
        counts = dict.fromkeys(("new", "updated", "unchanged", "failed"), 0)
        for outcome in outcomes:
            counts[outcome.action] += 1
        written = sum(o.chunks for o in outcomes if o.action in {"new", "updated"})
        rate = written / seconds if seconds > 0 else 0.0
        if dry_run:
            line = (
                f"Would ingest {len(outcomes)} file(s): {counts['new']} new, "
                f"{counts['updated']} updated, {counts['unchanged']} unchanged, "
                f"{counts['failed']} failed; {written} chunks."
            )
        else:
            line = (
                f"Ingested {len(outcomes)} file(s) in {seconds:.1f} s: {counts['new']} new, "
                f"{counts['updated']} updated, {counts['unchanged']} unchanged, "
                f"{counts['failed']} failed; {written} chunks ({rate:.1f} chunks/s)."
            )
        if skipped:
            line += f" Skipped {skipped} file(s) of unsupported types."
        if links:
            line += f" Skipped {len(links)} symbolic link(s): links are not followed."
        if dry_run:
            line += " Dry run: nothing was written."
        style = self.style.ERROR if counts["failed"] else self.style.SUCCESS
        self.stdout.write(style(line))
        for link in links:
            self.stdout.write(f"  skipped (a symbolic link): {link}")
        failed = [o for o in outcomes if o.action == "failed"]
        if failed:
            self.stdout.write("Failed:")
            for outcome in failed:
                self.stdout.write(f"  {outcome.source}: {outcome.error}")
            raise CommandError(f"{len(failed)} file(s) failed.", returncode=1)
