"""`evaluate --calibrate`: the evidence decision replayed at every threshold of the grid."""

from __future__ import annotations

from chat.answering.evidence_signals import PASSAGE_MARGIN, EvidenceSignals
from lab.evaluation.dataset import DatasetQuestion
from lab.evaluation.runner import QuestionResult, threshold_calibrate


def result(kind: str, passage: float, *, unknown: tuple[str, ...] = ()) -> QuestionResult:
    question = DatasetQuestion(
        id=f"{kind}-{passage}",
        question="?",
        expect="answer" if kind == "answerable" else "refusal",
        kind=kind,
        document=None,
        answers=(),
    )
    signals = EvidenceSignals(
        best_similarity=passage, passage_similarity=passage, unknown_specific_terms=unknown
    )
    return QuestionResult(question=question, signals=signals)


def test_calibration_finds_the_thresholds_that_separate_the_labels():
    # Answerable passages 0.50..0.89 (40 questions), off-KB 0.30 and 0.45: refusing every
    # off-KB question needs the passage floor (threshold + margin) above 0.45.
    answerable = [result("answerable", round(0.5 + 0.01 * i, 2)) for i in range(40)]
    off_kb = [result("off_kb", 0.30), result("off_kb", 0.45)]

    calibration = threshold_calibrate([*answerable, *off_kb], current=0.35)

    refuse_all = calibration["refuse_all_off_kb"]
    assert refuse_all["off_kb_refusal_rate"] == 1.0
    assert refuse_all["threshold"] + PASSAGE_MARGIN > 0.45
    assert refuse_all["threshold"] - 0.005 + PASSAGE_MARGIN <= 0.45  # the lowest such
    assert refuse_all["false_refusal_rate"] == 0.0
    keep = calibration["false_refusals_at_most_3pct"]
    assert keep["false_refusal_rate"] <= 0.03
    assert keep["threshold"] + PASSAGE_MARGIN <= 0.51  # at most one answerable refused
    current = calibration["current"]
    assert current == {"threshold": 0.35, "false_refusal_rate": 0.0, "off_kb_refusal_rate": 0.5}


def test_unknown_names_count_in_the_replayed_decision():
    # A passage between the two margins is refused when the question names something unknown.
    answerable = [result("answerable", 0.8) for _ in range(40)]
    with_name = result("off_kb", 0.5, unknown=("Fresno",))
    without = result("off_kb", 0.5)

    assert threshold_calibrate([*answerable, with_name], current=0.35)["current"][
        "off_kb_refusal_rate"
    ] == (1.0)
    assert threshold_calibrate([*answerable, without], current=0.35)["current"][
        "off_kb_refusal_rate"
    ] == (0.0)


def test_calibration_needs_both_kinds_of_question():
    assert "note" in threshold_calibrate([result("answerable", 0.6)], current=0.35)
