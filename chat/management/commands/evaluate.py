"""`manage.py evaluate DATASET`: answer quality on a labelled dataset (../shared/eval)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from chat.answering.evidence import evidence_threshold
from chat.evaluation.dataset import DatasetError, dataset_load
from chat.evaluation.isolated import isolated_database
from chat.evaluation.runner import (
    IngestionFailed,
    dataset_evaluate,
    dataset_ingest,
    figures_compute,
    figures_table,
    threshold_calibrate,
)
from chat.models import ChatSettings


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
            "evidence decision at thresholds 0.20..0.80).",
        )
        parser.add_argument(
            "--mode",
            choices=[choice for choice, _ in ChatSettings.Mode.choices],
            default=ChatSettings.Mode.EXTRACTIVE,
            help="Answering mode of the throwaway knowledge base (generative: the language "
            "model of the LLM_* settings).",
        )

    def handle(self, *args, **options) -> None:
        if options["limit"] < 0:
            raise CommandError("--limit must be 0 or more.")
        try:
            dataset = dataset_load(options["dataset"])
        except DatasetError as exc:
            raise CommandError(str(exc)) from exc
        questions = dataset.questions[: options["limit"] or None]
        if options["json"] and not options["json"].parent.is_dir():
            raise CommandError(f"Cannot write {options['json']}: no such folder.")

        # One log line per exchange would bury the table; the figures say it all.
        logging.getLogger("sourced.exchange").setLevel(logging.WARNING)
        with isolated_database("sourced_eval"):
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
            with tqdm(total=len(questions), desc="questions", unit="q") as bar:
                results = dataset_evaluate(
                    dataset,
                    questions=questions,
                    progress=bar.update,
                    signals=options["calibrate"],
                )
            threshold = evidence_threshold()

        figures = figures_compute(dataset.name, results, threshold=threshold)
        figures["mode"] = options["mode"]
        figures["ingest"] = {"documents": documents, "chunks": chunks, "seconds": round(seconds, 2)}
        if options["calibrate"]:
            figures["calibration"] = threshold_calibrate(results, threshold)
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
