"""`manage.py evaluate_followups DATASET`: the follow-up figures per kind of follow-up, the
failures with what was searched, and (`--try NAME=v1,v2,…`) a constant of the follow-up
planner chosen on folds (lab/evaluation/followup_kinds.py)."""

from __future__ import annotations

import json
from contextlib import nullcontext
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from lab.evaluation.dataset import DatasetError, dataset_load
from lab.evaluation.followup_kinds import (
    ExchangeReasons,
    adversarial_figures,
    constant_check,
    constant_choose_on_folds,
    constant_set,
    failures_list,
    figures_by_kind,
    followup_kinds_read,
    kinds_table,
)
from lab.evaluation.isolated import isolated_database
from lab.evaluation.logs import per_exchange_logs_quiet
from lab.evaluation.runner import IngestionFailed, dataset_evaluate, dataset_ingest, folds_assign


class Command(BaseCommand):
    help = (
        "Ingest a labelled dataset into a throwaway knowledge base, ask its questions (each "
        "follow-up in its conversation) and print the follow-ups' figures per kind "
        "(`followup_kind` of each question), with the failures and what was searched for them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", type=Path, help="Dataset JSON (see ../shared/eval).")
        parser.add_argument("--json", type=Path, help="Also write the figures to this file.")
        parser.add_argument(
            "--limit", type=int, default=0, help="Ask only the first N questions (0: all)."
        )
        parser.add_argument(
            "--failures", action="store_true", help="Also list every failed follow-up."
        )
        parser.add_argument(
            "--try",
            dest="try_values",
            default="",
            metavar="NAME=V1,V2,...",
            help="Run the dataset once per value of this constant of "
            "chat/answering/followups.py and choose it on folds (--folds, by document): for "
            "each fold, the value that scores best on the others, and the fold's figures at it.",
        )
        parser.add_argument("--folds", type=int, default=3, help="Folds for --try (default 3).")

    def handle(self, *args, **options) -> None:
        if options["limit"] < 0:
            raise CommandError("--limit must be 0 or more.")
        try:
            dataset = dataset_load(options["dataset"])
            kinds = followup_kinds_read(options["dataset"])
        except DatasetError as exc:
            raise CommandError(str(exc)) from exc
        name, values = self._values(options["try_values"])
        folds: list[list[str]] = []
        if name:
            try:
                folds = folds_assign(dataset, options["folds"])
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        questions = dataset.questions[: options["limit"] or None]
        runs = {}
        reasons = ExchangeReasons()
        # The exchange lines are read (ExchangeReasons); the other per-exchange lines would
        # bury the table.
        quiet = per_exchange_logs_quiet(keep=("sourced.exchange",))
        with quiet, isolated_database("sourced_eval"):
            try:
                dataset_ingest(dataset)
            except IngestionFailed as exc:
                raise CommandError(f"Ingestion failed: {exc}") from exc
            for value in values or [None]:
                with constant_set(name, value) if name else nullcontext(), reasons:
                    runs[value] = dataset_evaluate(dataset, questions=questions)
        report: dict = {"dataset": dataset.name}
        for value, results in runs.items():
            label = f"{name}={value}" if name else "as configured"
            by_kind = figures_by_kind(results, kinds)
            adversarial = adversarial_figures(results)
            report.setdefault("runs", {})[label] = {**by_kind, "adversarial": adversarial}
            self.stdout.write(f"\n{dataset.name}, follow-ups per kind ({label}):")
            self.stdout.write(kinds_table(by_kind))
            if adversarial["count"]:
                self.stdout.write(
                    f"adversarial follow-ups: {adversarial['count']}, "
                    f"refused {adversarial['refusal_rate']:.1%}, "
                    f"flagged {adversarial['flagged_rate']:.1%}"
                )
            if options["failures"]:
                for failure in failures_list(results, kinds, reasons.by_conversation):
                    state = "refused" if failure.refused else "missed"
                    self.stdout.write(
                        f"  {failure.id} [{failure.kind}, {state}] {failure.previous!r} → "
                        f"{failure.question!r} searched as {failure.search_query!r} "
                        f"({failure.evidence})"
                    )
        if name:
            chosen = constant_choose_on_folds(runs, kinds, folds)
            report["folds"] = chosen
            self.stdout.write(f"\n{name} chosen on folds (held-out fold's follow-ups):")
            for fold in chosen:
                self.stdout.write(f"  fold {fold['held_out']}: {name}={fold['chosen']}")
                self.stdout.write(kinds_table(fold["held_out_figures"]))
        if options["json"]:
            options["json"].write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")

    def _values(self, spec: str) -> tuple[str, list[float]]:
        if not spec:
            return "", []
        name, _, raw = spec.partition("=")
        try:
            values = [float(v) for v in raw.split(",") if v.strip()]
            constant_check(name)
        except ValueError as exc:
            raise CommandError(f"--try {spec!r}: {exc}") from exc
        if not values:
            raise CommandError(f"--try {spec!r}: give NAME=V1,V2,...")
        return name, values
