"""`manage.py bench_insights`: the insights page and export timed over N stored exchanges, in a
throwaway database (lab/benchmark/insights.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from lab.benchmark.insights import insights_measure, insights_report
from lab.benchmark.stats import load_average
from lab.evaluation.isolated import isolated_database

MAX_EXCHANGES = 5_000_000
DATABASE_PREFIX = "sourced_bench_insights"


class Command(BaseCommand):
    help = (
        "Time the admin's insights page (/admin/insights/, last 30 and 90 days, a superuser "
        "and a reader of 1 of 5 collections) and its CSV export over N exchanges bulk-loaded "
        "into a throwaway database (dropped at the end)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--exchanges", type=int, default=100_000, help="Stored exchanges (default 100000)."
        )
        parser.add_argument(
            "--rounds", type=int, default=5, help="Timed loads of each page (default 5)."
        )
        parser.add_argument("--json", type=Path, help="Also write the figures to this file.")

    def handle(self, *args, **options) -> None:
        if not 1 <= options["exchanges"] <= MAX_EXCHANGES:
            raise CommandError(f"--exchanges must be between 1 and {MAX_EXCHANGES}.")
        if not 1 <= options["rounds"] <= 100:
            raise CommandError("--rounds must be between 1 and 100.")
        json_path: Path | None = options["json"]
        if json_path and not json_path.parent.is_dir():
            raise CommandError(f"Cannot write {json_path}: no such folder.")
        logging.getLogger("django.request").setLevel(logging.ERROR)
        started_load = load_average()
        with isolated_database(DATABASE_PREFIX):
            figures = insights_measure(
                exchanges=options["exchanges"], rounds=options["rounds"], say=self.stderr.write
            )
        figures["load_average"] = {"start": started_load, "end": load_average()}
        self.stdout.write(insights_report(figures))
        if json_path:
            json_path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
            self.stdout.write(f"Figures written to {json_path}")
