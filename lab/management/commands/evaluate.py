"""`manage.py evaluate DATASET`: answer quality on a labelled dataset (../shared/eval)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chat.answering.evidence import evidence_threshold
from chat.calibration import calibration_refresh
from chat.models import ChatSettings
from lab.evaluation.dataset import Dataset, DatasetError, DatasetQuestion, dataset_load
from lab.evaluation.isolated import isolated_database
from lab.evaluation.logs import per_exchange_logs_quiet
from lab.evaluation.runner import (
    IngestionFailed,
    dataset_evaluate,
    dataset_ingest,
    figures_compute,
    figures_table,
    fold_calibration,
    fold_evaluate,
    folds_assign,
    folds_summary,
    folds_table,
    held_out_figures,
    threshold_calibrate,
)


class Command(BaseCommand):
    help = (
        "Ingest a labelled dataset into a throwaway knowledge base, ask every question through "
        "the answering pipeline and print citation accuracy, answer hit rate, refusal rates, "
        "retrieval recall@1/@5 and latencies. Never touches the knowledge base in use."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", type=Path, help="Dataset JSON (see ../shared/eval).")
        parser.add_argument("--json", type=Path, help="Also write the figures to this file.")
        parser.add_argument(
            "--limit", type=int, default=0, help="Ask only the first N questions (0: all)."
        )
        parser.add_argument(
            "--calibrate",
            action="store_true",
            help="Also report the evidence threshold these labels call for (replays the "
            "evidence decision at thresholds 0.20..0.80), beside the knowledge base's automatic "
            "threshold (measured on it, as after ingestion).",
        )
        parser.add_argument(
            "--mode",
            choices=[choice for choice, _ in ChatSettings.Mode.choices],
            default=ChatSettings.Mode.EXTRACTIVE,
            help="Answering mode of the throwaway knowledge base (generative: the language "
            "model of the LLM_* settings).",
        )
        parser.add_argument(
            "--folds",
            type=int,
            default=0,
            help="Evaluate as on unseen documents: split the dataset's documents into N folds "
            "(round-robin in file order); for each fold its documents are left out of the "
            "knowledge base (ingested once, disabled for that fold) and their questions count "
            "as off-KB ones. Prints every figure per fold, their mean and the worst fold; "
            "asks every question N times. 0 (default): one plain run.",
        )

    def handle(self, *args, **options) -> None:
        if options["limit"] < 0:
            raise CommandError("--limit must be 0 or more.")
        if options["folds"] < 0 or options["folds"] == 1:
            raise CommandError("--folds must be 2 or more (0: no folds).")
        try:
            dataset = dataset_load(options["dataset"])
        except DatasetError as exc:
            raise CommandError(str(exc)) from exc
        if options["folds"]:
            try:
                folds = folds_assign(dataset, options["folds"])
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        questions = dataset.questions[: options["limit"] or None]
        if options["json"] and not options["json"].parent.is_dir():
            raise CommandError(f"Cannot write {options['json']}: no such folder.")

        # One log line per exchange would bury the table; the figures say it all.
        with per_exchange_logs_quiet(), isolated_database("sourced_eval"):
            try:
                documents, chunks, seconds = dataset_ingest(dataset)
            except IngestionFailed as exc:
                raise CommandError(f"Ingestion failed: {exc}") from exc
            ChatSettings.objects.update_or_create(
                pk=1, defaults={"generation_mode": options["mode"]}
            )
            self.stdout.write(
                f"Ingested {documents} documents into a throwaway knowledge base: "
                f"{chunks} chunks in {seconds:.1f}s ({chunks / max(seconds, 1e-9):.1f} chunks/s)"
            )
            if options["folds"]:
                threshold = evidence_threshold()
                per_fold = self._folds(dataset, questions, folds, options, threshold)
            else:
                # The knowledge base's own calibration, as the background task would measure it.
                automatic = calibration_refresh() if options["calibrate"] else None
                with tqdm(total=len(questions), desc="questions", unit="q") as bar:
                    results = dataset_evaluate(
                        dataset,
                        questions=questions,
                        progress=bar.update,
                        signals=options["calibrate"],
                    )
                threshold = evidence_threshold()

        if options["folds"]:
            self._folds_report(dataset, per_fold, options, threshold, documents, chunks, seconds)
            return

        figures = figures_compute(dataset.name, results, threshold=threshold)
        figures["mode"] = options["mode"]
        figures["ingest"] = {"documents": documents, "chunks": chunks, "seconds": round(seconds, 2)}
        if options["calibrate"]:
            figures["calibration"] = threshold_calibrate(results, threshold, automatic)
        self.stdout.write("")
        self.stdout.write(
            f"{dataset.name}: {len(results)} questions, {options['mode']} mode, "
            f"evidence threshold {threshold}"
        )
        self.stdout.write(figures_table(figures))
        if options["calibrate"]:
            self.stdout.write(
                "\nCalibration (the evidence decision replayed at each threshold, from the labels):"
            )
            for name, values in figures["calibration"].items():
                self.stdout.write(f"  {name}: {json.dumps(values)}")
        if figures["errors"]:
            self.stderr.write(f"{figures['errors']} questions ended in an error.")
        if options["json"]:
            options["json"].write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
            self.stdout.write(f"Figures written to {options['json']}")

    def _folds(
        self,
        dataset: Dataset,
        questions: list[DatasetQuestion],
        folds: list[list[str]],
        options: dict[str, Any],
        threshold: float,
    ) -> list[dict[str, Any]]:
        """Every fold's figures (its documents left out), with the documents it left out."""
        kinds = {q.id: q.kind for q in questions}
        per_fold = []
        with tqdm(total=len(questions) * len(folds), desc="questions", unit="q") as bar:
            for left_out in folds:
                results = fold_evaluate(
                    dataset,
                    left_out,
                    questions=questions,
                    progress=bar.update,
                    signals=options["calibrate"],
                )
                figures = figures_compute(dataset.name, results, threshold=threshold)
                figures["held_out"] = held_out_figures(results, kinds)
                figures["left_out"] = left_out
                if options["calibrate"]:
                    figures["calibration"] = threshold_calibrate(
                        results, threshold, fold_calibration(dataset, left_out)
                    )
                per_fold.append(figures)
        return per_fold

    def _folds_report(
        self,
        dataset: Dataset,
        per_fold: list[dict[str, Any]],
        options: dict[str, Any],
        threshold: float,
        documents: int,
        chunks: int,
        seconds: float,
    ) -> None:
        summary = folds_summary(per_fold)
        self.stdout.write("")
        self.stdout.write(
            f"{dataset.name}: {len(per_fold)} folds, each leaving out its documents "
            f"({options['mode']} mode, evidence threshold {threshold})"
        )
        self.stdout.write(folds_table(per_fold, summary))
        errors = sum(f["errors"] for f in per_fold)
        if errors:
            self.stderr.write(f"{errors} questions ended in an error.")
        if options["json"]:
            report = {
                "dataset": dataset.name,
                "mode": options["mode"],
                "evidence_threshold": threshold,
                "folds": per_fold,
                "mean": summary["mean"],
                "worst": summary["worst"],
                "ingest": {"documents": documents, "chunks": chunks, "seconds": round(seconds, 2)},
            }
            options["json"].write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
            self.stdout.write(f"Figures written to {options['json']}")
