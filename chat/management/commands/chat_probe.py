"""`manage.py chat_probe DATASET`: a quick latency and quality probe of the answering pipeline.

In a throwaway database (created, migrated, dropped at the end; the user's data is never
touched) it ingests the dataset's documents through the normal ingestion code, then asks its
questions through `answer_stream` — each a new conversation, the same code path as the API —
and reports time to first event and total time (p50 / p95), the share of answerable questions
whose cited chunks contain a gold answer, and the refusal rates. The evaluation command proper
(`evaluate`) is built by the evaluation issue; this is the chat core's own quick check.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from asgiref.sync import async_to_sync
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from chat.answering.pipeline import AnswerOptions, answer_stream
from chat.evaluation.dataset import DatasetError, contains_gold, dataset_load
from chat.evaluation.isolated import isolated_database


def percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


class Command(BaseCommand):
    help = (
        "Ask a dataset's questions through the answering pipeline in a throwaway database and "
        "report time to first event and rough answer quality."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", type=Path, help="An evaluation dataset (JSON).")
        parser.add_argument(
            "--limit", type=int, default=0, help="Ask at most this many questions (0: all)."
        )
        parser.add_argument(
            "--seed", type=int, default=0, help="Shuffle the questions with this seed first."
        )
        parser.add_argument("--json", type=Path, help="Also write the figures to this file.")

    def handle(self, *args, **options) -> None:
        try:
            dataset = dataset_load(options["dataset"])
        except DatasetError as exc:
            raise CommandError(str(exc)) from exc
        questions = list(dataset.questions)
        if options["seed"]:
            random.Random(options["seed"]).shuffle(questions)
        if options["limit"] > 0:
            questions = questions[: options["limit"]]

        if options["verbosity"] < 2:  # one log line per exchange would drown the report
            logging.getLogger("sourced.exchange").setLevel(logging.WARNING)
        with isolated_database("sourced_probe"), tempfile.TemporaryDirectory() as folder:
            from knowledge.services import documents_ingest

            for document in dataset.documents:
                (Path(folder) / document.file_name).write_text(document.text, encoding="utf-8")
            started = time.perf_counter()
            outcomes = documents_ingest(
                paths=[Path(folder)], title=None, enabled=True, dry_run=False
            )
            failed = [o for o in outcomes if o.action == "failed"]
            if failed:
                raise CommandError(f"Ingestion failed: {failed[0].source}: {failed[0].error}")
            chunks = sum(o.chunks for o in outcomes)
            self.stdout.write(
                f"Ingested {len(outcomes)} documents, {chunks} chunks in "
                f"{time.perf_counter() - started:.1f}s"
            )
            user = get_user_model().objects.create_user(username="probe", is_staff=True)
            results = async_to_sync(self._ask_all)(user, questions)
        figures = self._figures(dataset.name, questions, results)
        self.stdout.write(json.dumps(figures, indent=2))
        if options["json"]:
            options["json"].write_text(json.dumps(figures, indent=2))

    async def _ask_all(self, user, questions) -> list[dict]:
        results = []
        for index, question in enumerate(questions, start=1):
            results.append(await self._ask(user, question.question))
            if index % 50 == 0:
                self.stdout.write(f"  {index}/{len(questions)} questions")
        return results

    async def _ask(self, user, text: str) -> dict:
        started = time.perf_counter()
        first = None
        result = {"refused": False, "content": "", "cited": [], "error": False}
        async for event in answer_stream(
            user=user, question=text, message_id=uuid.uuid4(), options=AnswerOptions()
        ):
            if first is None:
                first = (time.perf_counter() - started) * 1000
            if event.type == "refusal":
                result["refused"] = True
            elif event.type == "answer_delta":
                result["content"] += event.data["text"]
            elif event.type == "sources":
                result["cited"] = [c["text"] for c in event.data["citations"]]
            elif event.type == "error":
                result["error"] = True
        result["first_event_ms"] = first or 0.0
        result["total_ms"] = (time.perf_counter() - started) * 1000
        await asyncio.sleep(0)
        return result

    def _figures(self, name: str, questions, results) -> dict:
        figures: dict = {"dataset": name, "questions": len(questions)}
        by_kind: dict[str, list[tuple]] = {}
        for question, result in zip(questions, results, strict=True):
            by_kind.setdefault(question.kind, []).append((question, result))
        answerable = by_kind.get("answerable", [])
        if answerable:
            count = len(answerable)
            figures["answerable"] = {
                "count": count,
                "citation_accuracy": sum(
                    any(contains_gold(text, q.answers) for text in r["cited"])
                    for q, r in answerable
                )
                / count,
                "answer_hit_rate": sum(
                    contains_gold(r["content"], q.answers) for q, r in answerable
                )
                / count,
                "false_refusal_rate": sum(r["refused"] for _, r in answerable) / count,
            }
        for kind in ("off_kb", "adversarial"):
            pairs = by_kind.get(kind, [])
            if pairs:
                figures[kind] = {
                    "count": len(pairs),
                    "refusal_rate": sum(r["refused"] for _, r in pairs) / len(pairs),
                }
        first = [r["first_event_ms"] for r in results]
        total = [r["total_ms"] for r in results]
        figures["latency_ms"] = {
            "first_event_p50": round(statistics.median(first), 1) if first else 0.0,
            "first_event_p95": round(percentile(first, 0.95), 1),
            "total_p50": round(statistics.median(total), 1) if total else 0.0,
            "total_p95": round(percentile(total, 0.95), 1),
        }
        figures["errors"] = sum(r["error"] for r in results)
        return figures
