"""`manage.py bench`: ingestion, retrieval, answer latency over a running server, conversation
load and server memory, measured on this machine in a throwaway database."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from config.web import processes_default
from lab.benchmark.clients import ClientError
from lab.benchmark.report import report_text
from lab.benchmark.run import BenchOptions, bench_run
from lab.benchmark.server import ServerError
from lab.benchmark.stats import int_list_parse
from lab.evaluation.dataset import DatasetError, dataset_load
from lab.evaluation.logs import per_exchange_logs_quiet
from lab.evaluation.runner import IngestionFailed

MAX_CHUNKS = 2_000_000
MAX_CONCURRENCY = 100
MAX_QUESTIONS = 10_000
MAX_WEB_PROCESSES = 16
MAX_READING_FILES = 20  # PERSONAL_FILES_MAX_PER_USER by default


def default_dataset() -> Path:
    return settings.BASE_DIR.parent / "shared" / "eval" / "squad2-visible.json"


class Command(BaseCommand):
    help = (
        "Measure ingestion throughput (vs. the embedding model alone), retrieval latency at "
        "each corpus size (the large corpus is synthetic: perturbed copies of the real chunks), "
        "time to first answer event and total time over the WebSocket and SSE of a running "
        "daphne at each concurrency, conversation load time (200 messages) and the server's "
        "peak memory. Everything happens in a throwaway database; progress goes to stderr."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--chunks",
            default="10000,100000",
            help="Corpus sizes in chunks, comma-separated (default 10000,100000). The server "
            "is measured at the largest.",
        )
        parser.add_argument(
            "--concurrency",
            default="1,20",
            help=f"Simultaneous clients, comma-separated, 1..{MAX_CONCURRENCY} (default 1,20).",
        )
        parser.add_argument(
            "--questions",
            type=int,
            default=100,
            help="Questions of the dataset per measurement (default 100): asked at each corpus "
            "size, and shared by the clients at each concurrency (each asks ⌈N/c⌉). Also the "
            "number of conversation loads, kept within 5..30.",
        )
        parser.add_argument(
            "--dataset",
            type=Path,
            default=None,
            help="Dataset JSON in the ../shared/eval format (default "
            "../shared/eval/squad2-visible.json next to the project).",
        )
        parser.add_argument(
            "--web-processes",
            type=int,
            default=processes_default(),
            help="daphne processes of the measured server, as bin/serve runs them (default: "
            "WEB_PROCESSES, else 2).",
        )
        parser.add_argument(
            "--compare-processes",
            default="",
            help="Also measure the answers again against servers of each of these process "
            "counts (comma-separated, e.g. 1,2), in turns, --compare-rounds times each: the "
            "figures to choose WEB_PROCESSES by, under the same machine load.",
        )
        parser.add_argument(
            "--compare-rounds",
            type=int,
            default=2,
            help="Rounds of --compare-processes (default 2).",
        )
        parser.add_argument(
            "--retrieval-only",
            action="store_true",
            help="Measure only ingestion, retrieval at each size and the collections case "
            "(20 collections, a reader of 3 vs. unrestricted); no server, no answers.",
        )
        parser.add_argument(
            "--while-reading",
            type=int,
            default=0,
            metavar="N",
            help="Also measure other users' first answer event over the WebSocket at each "
            "concurrency without and with N personal files (PDFs of 20 pages) being read by a "
            "real ingestion worker process, in turns; prints both p95s and their ratio "
            f"(0..{MAX_READING_FILES}; default 0: not measured).",
        )
        parser.add_argument("--json", type=Path, help="Also write the figures to this file.")

    def handle(self, *args, **options) -> None:
        try:
            sizes = int_list_parse(options["chunks"], name="--chunks", low=1, high=MAX_CHUNKS)
            concurrency = int_list_parse(
                options["concurrency"], name="--concurrency", low=1, high=MAX_CONCURRENCY
            )
            compare = (
                int_list_parse(
                    options["compare_processes"],
                    name="--compare-processes",
                    low=1,
                    high=MAX_WEB_PROCESSES,
                )
                if options["compare_processes"]
                else []
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if not 1 <= options["compare_rounds"] <= 10:
            raise CommandError("--compare-rounds must be between 1 and 10.")
        if not 1 <= options["questions"] <= MAX_QUESTIONS:
            raise CommandError(f"--questions must be between 1 and {MAX_QUESTIONS}.")
        if not 1 <= options["web_processes"] <= MAX_WEB_PROCESSES:
            raise CommandError(f"--web-processes must be between 1 and {MAX_WEB_PROCESSES}.")
        if not 0 <= options["while_reading"] <= MAX_READING_FILES:
            raise CommandError(f"--while-reading must be between 0 and {MAX_READING_FILES}.")
        if options["while_reading"] and options["retrieval_only"]:
            raise CommandError("--while-reading measures answers: not with --retrieval-only.")
        json_path: Path | None = options["json"]
        if json_path and not json_path.parent.is_dir():
            raise CommandError(f"Cannot write {json_path}: no such folder.")
        try:
            dataset = dataset_load(options["dataset"] or default_dataset())
        except DatasetError as exc:
            raise CommandError(str(exc)) from exc

        run_options = BenchOptions(
            sizes=sizes,
            concurrency=concurrency,
            questions=options["questions"],
            web_processes=options["web_processes"],
            compare_processes=tuple(compare),
            compare_rounds=options["compare_rounds"],
            retrieval_only=options["retrieval_only"],
            while_reading=options["while_reading"],
        )
        try:
            # One log line per exchange would bury the report.
            with per_exchange_logs_quiet():
                figures = bench_run(dataset, run_options, say=self.stderr.write)
        except IngestionFailed as exc:
            raise CommandError(f"Ingestion failed: {exc}") from exc
        except (ServerError, ClientError) as exc:
            raise CommandError(f"The server benchmark failed: {exc}") from exc
        except KeyboardInterrupt:
            self.stderr.write(
                "\nInterrupted: the benchmark server (if started) was stopped and the throwaway "
                "database dropped."
            )
            raise SystemExit(130) from None

        self.stdout.write(report_text(figures))
        if figures.get("errors"):
            self.stderr.write(f"{figures['errors']} questions ended in an error (see above).")
        if json_path:
            json_path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
            self.stdout.write(f"Figures written to {json_path}")
