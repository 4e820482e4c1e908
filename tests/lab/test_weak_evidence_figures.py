"""`evaluate`'s weak-evidence figures: `flagged_rate` per kind (answered with the notice) in
the JSON and the printed tables, and `--calibrate`'s replay of the weak-support band."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from chat.answering import evidence_signals
from chat.answering.evidence_signals import EvidenceSignals
from chat.answering.features import QuestionFeatures
from lab.evaluation.dataset import DatasetQuestion
from lab.evaluation.runner import (
    QuestionResult,
    band_calibrate,
    figures_compute,
    figures_table,
    folds_summary,
    folds_table,
    held_out_figures,
)


def result(kind: str, *, refused: bool = False, flagged: bool = False, signals=None):
    question = DatasetQuestion(
        id=f"{kind}-{refused}-{flagged}-{id(signals)}",
        question="Q?",
        expect="refusal" if kind != "answerable" else "answer",
        kind=kind,
        document="doc",
        answers=("gold",) if kind == "answerable" else (),
    )
    return QuestionResult(
        question=question,
        refused=refused,
        flagged=flagged,
        content="" if refused else "gold",
        cited_texts=[] if refused else ["gold"],
        signals=signals,
    )


def test_flagged_rate_is_reported_per_kind_in_the_figures_and_the_tables():
    results = [
        result("answerable"),
        result("answerable", flagged=True),
        result("answerable"),
        result("answerable"),
        result("off_kb", refused=True),
        result("off_kb", flagged=True),
        result("off_kb"),
        result("off_kb", refused=True),
        result("adversarial", flagged=True),
    ]

    figures = figures_compute("small", results)

    assert figures["answerable"]["flagged_rate"] == 0.25
    assert figures["answerable"]["false_refusal_rate"] == 0.0
    assert {k: figures["off_kb"][k] for k in ("refusal_rate", "flagged_rate")} == {
        "refusal_rate": 0.5,
        "flagged_rate": 0.25,
    }
    assert figures["off_kb"]["refused_or_flagged_rate"] == 0.75
    assert figures["adversarial"]["flagged_rate"] == 1.0
    table = figures_table(figures)
    flagged_rows = [line for line in table.splitlines() if "flagged (weak evidence)" in line]
    assert [row.split()[-1] for row in flagged_rows] == ["25.0%", "25.0%", "100.0%"]

    figures["held_out"] = held_out_figures(results, {r.question.id: "answerable" for r in results})
    assert figures["held_out"]["flagged_rate"] == 0.25
    folds = [figures, figures]
    summary = folds_summary(folds)
    assert summary["worst"]["answerable.flagged_rate"] == 0.25
    folded = folds_table(folds, summary)
    assert "answerable flagged" in folded and "left-out refused or flagged" in folded


def signals_with(passage: float, threshold: float = 0.35) -> EvidenceSignals:
    features = QuestionFeatures(
        best_similarity=passage,
        passage_similarity=passage,
        best_sentence="",
        answer_type="",
        type_match=True,
        coverage=1.0,
        rarest_covered=True,
        chunk_coverage=1.0,
        ranks_agree=True,
        unknown_specific=0,
        unknown_share=0.0,
    )
    return EvidenceSignals(best_similarity=passage, passage_similarity=passage, features=features)


def test_calibrate_replays_the_band_at_each_of_its_edges():
    results = [
        result("answerable", signals=signals_with(0.8)),
        result("answerable", signals=signals_with(0.5)),
        result("off_kb", signals=signals_with(0.48)),
        result("off_kb", signals=None),  # nothing retrieved: refused
        result("adversarial", signals=signals_with(0.2)),  # below the threshold: refused
    ]

    rows = {(row["score"], row["margin"]): row for row in band_calibrate(results, 0.35)}

    assert rows[(0.0, 0.0)] == {
        "score": 0.0,
        "margin": 0.0,
        "answerable_flagged_rate": 0.0,
        "off_kb_refused_or_flagged_rate": 0.5,
        "adversarial_refused_or_flagged_rate": 1.0,
    }
    # A margin of 0.16 puts passages below 0.51 in the band: one answerable, the off-KB one.
    assert rows[(0.0, 0.16)]["answerable_flagged_rate"] == 0.5
    assert rows[(0.0, 0.16)]["off_kb_refused_or_flagged_rate"] == 1.0
    assert rows[(0.0, 0.12)]["answerable_flagged_rate"] == 0.0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_evaluate_counts_answers_given_with_the_notice(tiny_dataset, tmp_path, monkeypatch):
    monkeypatch.setattr(evidence_signals, "WEAK_SUPPORT_SCORE", 1e9)  # every answer is weak
    out = StringIO()
    json_path = tmp_path / "figures.json"

    call_command("evaluate", str(tiny_dataset), "--json", str(json_path), stdout=out)

    figures = json.loads(json_path.read_text())
    assert figures["answerable"]["flagged_rate"] == 1.0
    assert figures["answerable"]["false_refusal_rate"] == 0.0
    assert figures["off_kb"]["flagged_rate"] == 0.0 and figures["off_kb"]["refusal_rate"] == 1.0
    assert "flagged (weak evidence)  100.0%" in out.getvalue()
