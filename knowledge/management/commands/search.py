"""`manage.py search "question"`: the operator's view of what retrieval returns."""

from __future__ import annotations

from argparse import ArgumentParser

from django.core.management.base import BaseCommand, CommandError

from knowledge.access import OPERATOR
from knowledge.models import Document
from knowledge.retrieval import MODES, TOP_K_DEFAULT, chunks_search, excerpt_of, validate_top_k
from knowledge.search_scope import knowledge_base_is_empty

EXCERPT_CHARS = 160


class Command(BaseCommand):
    help = (
        "Rank the knowledge base's chunks for a question and print them: rank, fused score, "
        "cosine similarity, document, page/section, chunk index and an excerpt."
    )

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("question", nargs="+", help="The question (quote it or not).")
        parser.add_argument(
            "--top-k",
            type=int,
            default=TOP_K_DEFAULT,
            help=f"How many chunks to show, 1..20 (default {TOP_K_DEFAULT}).",
        )
        parser.add_argument(
            "--mode",
            default="hybrid",
            help=f"One of {', '.join(MODES)} (default hybrid).",
        )
        parser.add_argument(
            "--document",
            dest="document_ids",
            type=int,
            nargs="+",
            metavar="ID",
            help="Search only these documents (ids as shown in the admin).",
        )

    def handle(self, *args, question: list[str], top_k: int, mode: str, **options) -> None:
        text = " ".join(question).strip()
        if not text:
            raise CommandError("The question is empty.")
        try:
            validate_top_k(top_k)
        except ValueError as error:
            raise CommandError(f"--top-k: {error}") from error
        if mode not in MODES:
            raise CommandError(f"--mode must be one of: {', '.join(MODES)} (got {mode!r}).")
        document_ids = options.get("document_ids")
        if document_ids:
            found = set(Document.objects.filter(pk__in=document_ids).values_list("pk", flat=True))
            missing = sorted(set(document_ids) - found)
            if missing:
                raise CommandError(f"No document with id {', '.join(map(str, missing))}.")

        # The operator's command: every available document, whoever may read it.
        if knowledge_base_is_empty(reader=OPERATOR):
            self.stdout.write("The knowledge base is empty: ingest documents first.")
            return
        result = chunks_search(
            query=text, reader=OPERATOR, top_k=top_k, mode=mode, document_ids=document_ids
        )
        if result.truncated:
            self.stderr.write(
                self.style.WARNING("The question was cut to fit the embedding model's limit.")
            )
        if not result.chunks:
            self.stdout.write("No matching chunks.")
            return
        for rank, chunk in enumerate(result.chunks, start=1):
            similarity = "-" if chunk.similarity is None else f"{chunk.similarity:.3f}"
            where = []
            if chunk.page is not None:
                where.append(f"page {chunk.page}")
            if chunk.section:
                where.append(f"section {chunk.section}")
            if chunk.sheet:
                where.append(f"{chunk.sheet}!{chunk.cells}")
            self.stdout.write(
                f"{rank:>2}. score {chunk.score:.4f}  similarity {similarity}  "
                f"{chunk.document_title} (document {chunk.document_id}, "
                f"chunk {chunk.chunk_index})" + (f"  {'; '.join(where)}" if where else "")
            )
            self.stdout.write(f"    {excerpt_of(chunk.text, EXCERPT_CHARS)}")
