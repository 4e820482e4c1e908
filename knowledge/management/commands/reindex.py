"""`manage.py reindex`: bring embeddings up to date, or re-chunk and re-embed documents."""

from __future__ import annotations

import sys
import time

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from knowledge import embedding
from knowledge.chunking import CHUNKER_VERSION
from knowledge.models import Chunk, Document
from knowledge.selectors import (
    documents_chunker_stale,
    embeddings_stale,
    sentence_vectors_stale_count,
)
from knowledge.services.ingest import documents_reindex
from knowledge.services.reindex import embeddings_rebuild_stale, sentence_vectors_rebuild_stale


class Command(BaseCommand):
    help = (
        "Re-chunk documents cut by an older chunker and re-embed chunks whose embedding is "
        "missing or from another model (--stale, the default), or re-chunk and re-embed "
        "chosen documents (--document ID ...) or all of them (--all) from their original files."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group()
        which.add_argument(
            "--stale",
            action="store_true",
            help="Re-chunk documents cut by an older chunker, then re-embed chunks without an "
            "embedding under the configured model (default).",
        )
        which.add_argument(
            "--document",
            dest="document_ids",
            type=int,
            nargs="+",
            action="extend",
            metavar="ID",
            help="Re-chunk and re-embed these documents.",
        )
        which.add_argument(
            "--all",
            dest="all_documents",
            action="store_true",
            help="Re-chunk and re-embed every document.",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="Report what would be done, change nothing."
        )

    def handle(
        self,
        *args,
        stale: bool,
        document_ids: list[int] | None,
        all_documents: bool,
        dry_run: bool,
        **_,
    ) -> None:
        if all_documents or document_ids:
            self._documents(document_ids=None if all_documents else document_ids, dry_run=dry_run)
        else:
            self._stale(dry_run=dry_run)

    def _stale(self, *, dry_run: bool) -> None:
        model = embedding.model_version()
        rechunk = list(documents_chunker_stale())
        if dry_run and rechunk:
            self.stdout.write(
                f"Would re-chunk {len(rechunk)} document(s) cut by an older chunker "
                f"(today's is version {CHUNKER_VERSION})."
            )
        failed = self._reindex(rechunk) if rechunk and not dry_run else 0
        total = embeddings_stale().count()
        if dry_run:
            self.stdout.write(
                f"Would re-embed {total} chunk(s) with {model}, and the sentences of every "
                f"chunk that have no stored vector from it "
                f"({sentence_vectors_stale_count()} from other models would go). "
                "Nothing changed."
            )
            return
        if not total:
            self.stdout.write(self.style.SUCCESS(f"Every chunk has an embedding from {model}."))
        else:
            started = time.monotonic()
            with tqdm(total=total, unit="chunk", desc="Re-embedding", file=sys.stderr) as bar:
                done = embeddings_rebuild_stale(progress=bar.update)
            seconds = time.monotonic() - started
            self.stdout.write(
                self.style.SUCCESS(f"Re-embedded {done} chunk(s) with {model} in {seconds:.1f} s.")
            )
        started = time.monotonic()
        chunks = Chunk.objects.count()
        with tqdm(total=chunks, unit="chunk", desc="Sentences", file=sys.stderr) as bar:
            sentences = sentence_vectors_rebuild_stale(progress=bar.update)
        self.stdout.write(
            self.style.SUCCESS(
                f"Embedded {sentences} sentence(s) without a stored vector with {model} in "
                f"{time.monotonic() - started:.1f} s."
            )
        )
        if failed:
            raise CommandError(f"{failed} document(s) could not be re-chunked.", returncode=1)

    def _documents(self, *, document_ids: list[int] | None, dry_run: bool) -> None:
        documents = Document.objects.order_by("pk")
        if document_ids is not None:
            wanted = list(dict.fromkeys(document_ids))
            documents = documents.filter(pk__in=wanted)
            unknown = sorted(set(wanted) - {d.pk for d in documents})
            if unknown:
                raise CommandError(f"No document with id {', '.join(map(str, unknown))}.")
        documents = list(documents)
        if not documents:
            self.stdout.write("There are no documents to re-index.")
            return
        if dry_run:
            self.stdout.write(f"Would re-chunk and re-embed {len(documents)} document(s):")
            for document in documents:
                self.stdout.write(f"  {document.pk}: {document.title} ({document.source})")
            self.stdout.write("Dry run: nothing was changed.")
            return
        failed = self._reindex(documents)
        if failed:
            raise CommandError(f"{failed} document(s) failed.", returncode=1)

    def _reindex(self, documents: list[Document]) -> int:
        """Re-chunk and re-embed `documents` from their files; prints the outcome and returns
        how many failed (each one left as it was)."""
        started = time.monotonic()
        with tqdm(total=len(documents), unit="doc", desc="Re-indexing", file=sys.stderr) as bar:
            outcomes = documents_reindex(documents=documents, progress=bar.update)
        seconds = time.monotonic() - started
        failed = [o for o in outcomes if o.action == "failed"]
        chunks = sum(o.chunks for o in outcomes if o.action != "failed")
        style = self.style.ERROR if failed else self.style.SUCCESS
        self.stdout.write(
            style(
                f"Re-indexed {len(outcomes) - len(failed)} document(s), {chunks} chunks, "
                f"in {seconds:.1f} s; {len(failed)} failed."
            )
        )
        if failed:
            self.stdout.write("Failed:")
            for outcome in failed:
                self.stdout.write(f"  {outcome.source}: {outcome.error}")
        return len(failed)
