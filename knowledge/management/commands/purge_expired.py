"""`manage.py purge_expired [--dry-run]`: delete the documents whose expiry date has passed."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from knowledge.personal import personal_files_purge_expired
from knowledge.services.lifecycle import documents_purge_expired


class Command(BaseCommand):
    help = (
        "Delete the documents whose expiry (Document.expires_at) has passed, with their "
        "chunks, embeddings and uploaded files. Answers that cited them keep their citation "
        "snapshots, shown as from a removed document. Expired documents are never cited even "
        "before they are purged. Expired personal files lose their text, chunks, vectors and "
        "file (their row stays, docs/decisions/0081-personal-files.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--dry-run", action="store_true", help="List what would be deleted, delete nothing."
        )

    def handle(self, *args, dry_run: bool, **options) -> None:
        documents = documents_purge_expired(
            dry_run=dry_run,
            progress=lambda n: self.stdout.write(f"  deleted {n} document(s)…"),
        )
        for document in documents:
            expired = timezone.localtime(document.expires_at).strftime("%Y-%m-%d %H:%M")
            self.stdout.write(f"  #{document.pk} {document.title} (expired {expired})")
        if dry_run:
            self.stdout.write(
                f"Would delete {len(documents)} expired document(s). Dry run: nothing was deleted."
            )
        else:
            self.stdout.write(self.style.SUCCESS(f"Deleted {len(documents)} expired document(s)."))
            purged = personal_files_purge_expired()
            self.stdout.write(self.style.SUCCESS(f"Purged {purged} expired personal file(s)."))
