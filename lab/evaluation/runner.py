"""Run a labelled dataset through the real ingestion and answering code and score it.

The protocol is ../shared/eval/README.md: ingest every document into a fresh knowledge base
(a throwaway database on the same server), ask every question through `answer_stream` in the
default settings, each as a new conversation — or, for a question that `follows` another, in the
conversation of the question it follows, right after it — and report per kind: citation
accuracy, answer hit rate, false refusals, refusal rates, retrieval recall@1/@5, and latencies;
the same figures over the follow-up questions alone under "followup". `--calibrate`'s replay and
`--folds`: docs/decisions/0057-evaluate-protocol-folds-and-calibration.md.
"""

from __future__ import annotations

import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model

from chat.answering.evidence_signals import (
    THRESHOLD_ON,
    WEAK_SUPPORT,
    EvidenceSignals,
    evidence_signals_all,
    signals_sufficient,
)
from chat.answering.pipeline import AnswerOptions, answer_stream
from knowledge.access import OPERATOR
from knowledge.retrieval import chunks_search
from lab.evaluation.dataset import Dataset, DatasetQuestion, contains_gold

RECALL_DEPTH = 5
# The thresholds --calibrate tries: 0.200, 0.205, ... 0.800.
CALIBRATION_GRID = [round(0.2 + 0.005 * i, 3) for i in range(121)]


class IngestionFailed(RuntimeError):
    """A dataset document could not be ingested."""


@dataclass
class QuestionResult:
    question: DatasetQuestion
    conversation_id: str = ""
    search_query: str = ""  # what retrieval searched for (the question, or read in context)
    refused: bool = False
    flagged: bool = False  # answered with the weak-evidence notice (sources `evidence: "weak"`)
    error: str = ""
    content: str = ""
    cited_texts: list[str] = field(default_factory=list)
    retrieved_texts: list[str] = field(default_factory=list)
    best_similarity: float | None = None
    signals: EvidenceSignals | None = None  # every evidence signal, for --calibrate
    first_event_ms: float = 0.0  # the first event of any type
    first_content_ms: float = 0.0  # the first answer_delta or the refusal
    total_ms: float = 0.0


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (share in 0..1); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]


def dataset_ingest(dataset: Dataset) -> tuple[int, int, float]:
    """Write the documents out as files and ingest them; (documents, chunks, seconds)."""
    from knowledge.services import documents_ingest

    with tempfile.TemporaryDirectory() as folder:
        for document in dataset.documents:
            document.write_to(Path(folder))
        started = time.perf_counter()
        outcomes = documents_ingest(paths=[Path(folder)], title=None, enabled=True, dry_run=False)
        seconds = time.perf_counter() - started
    failed = [o for o in outcomes if o.action == "failed"]
    if failed:
        raise IngestionFailed(f"{failed[0].source}: {failed[0].error}")
    return len(outcomes), sum(o.chunks for o in outcomes), seconds


async def question_ask(
    user: Any, question: DatasetQuestion, *, conversation_id: str | None = None
) -> QuestionResult:
    """One question through the answering pipeline: in conversation `conversation_id` (an
    earlier question's), or as a new conversation."""
    result = QuestionResult(question=question, conversation_id=conversation_id or "")
    started = time.perf_counter()
    async for event in answer_stream(
        user=user,
        question=question.question,
        message_id=uuid.uuid4(),
        conversation_id=conversation_id or uuid.uuid4(),
        options=AnswerOptions(),
    ):
        elapsed = (time.perf_counter() - started) * 1000
        if not result.first_event_ms:
            result.first_event_ms = elapsed
        if event.type in ("answer_delta", "refusal") and not result.first_content_ms:
            result.first_content_ms = elapsed
        if event.type in ("answer_start", "refusal"):
            result.conversation_id = event.data["conversation_id"]
            result.search_query = event.data.get("search_query") or question.question
        if event.type == "refusal":
            result.refused = True
        elif event.type == "answer_delta":
            result.content += event.data["text"]
        elif event.type == "sources":
            result.cited_texts = [c.get("text") or c["excerpt"] for c in event.data["citations"]]
            result.flagged = event.data.get("evidence") == "weak"
        elif event.type == "error":
            result.error = event.data.get("code", "error")
    result.total_ms = (time.perf_counter() - started) * 1000
    return result


def retrieval_probe(result: QuestionResult, *, signals: bool = False) -> None:
    """What retrieval returns for the question before the evidence check (for recall@k), searched
    as the pipeline searched it (a follow-up in its conversation's context); with `signals`,
    also every signal the evidence check may use (it computes them only as needed), so
    --calibrate can replay the decision at any threshold."""
    question = result.search_query or result.question.question
    search = chunks_search(query=question, reader=OPERATOR, top_k=RECALL_DEPTH)
    result.retrieved_texts = [chunk.text for chunk in search.chunks]
    result.best_similarity = search.best_similarity
    if signals and search.chunks:
        result.signals = evidence_signals_all(
            question=question,
            question_vector=search.query_vector,
            chunks=search.chunks,
            reader=OPERATOR,
        )


def dataset_evaluate(
    dataset: Dataset,
    *,
    questions: list[DatasetQuestion] | None = None,
    progress: Callable[[int], None] | None = None,
    signals: bool = False,
) -> list[QuestionResult]:
    """Ask every question (in the current database, which must hold the dataset's KB); with
    `signals`, also collect every evidence signal per question (for `threshold_calibrate`)."""
    user, _ = get_user_model().objects.get_or_create(
        username="evaluation", defaults={"is_staff": True}
    )

    async def ask_all() -> list[QuestionResult]:
        results: list[QuestionResult] = []
        conversations: dict[str, str] = {}  # question id → its conversation
        for question in questions if questions is not None else dataset.questions:
            result = await question_ask(
                user, question, conversation_id=conversations.get(question.follows or "")
            )
            conversations[question.id] = result.conversation_id
            await sync_to_async(retrieval_probe, thread_sensitive=True)(result, signals=signals)
            results.append(result)
            if progress:
                progress(1)
        return results

    return async_to_sync(ask_all)()


def _rate(flags: list[bool]) -> float:
    return round(sum(flags) / len(flags), 4) if flags else 0.0


def figures_compute(
    name: str, results: list[QuestionResult], threshold: float | None = None
) -> dict[str, Any]:
    """The figures of ../shared/eval/README.md (fractions 0..1, times in ms), and per kind
    `flagged_rate`: the share of its questions answered with the weak-evidence notice."""
    by_kind: dict[str, list[QuestionResult]] = {}
    for result in results:
        by_kind.setdefault(result.question.kind, []).append(result)
    figures: dict[str, Any] = {
        "dataset": name,
        "mode": "extractive",
        "questions": len(results),
    }
    if threshold is not None:
        figures["evidence_threshold"] = threshold
    figures["answerable"] = _answerable_figures(by_kind.get("answerable", []))
    for kind in ("off_kb", "adversarial"):
        group = by_kind.get(kind, [])
        figures[kind] = {"count": len(group), **_unanswerable_rates(group)}
    figures["latency_ms"] = latency_figures(results)
    for kind, group in by_kind.items():
        figures.setdefault(kind, {})["latency_ms"] = latency_figures(group)
    figures["errors"] = sum(bool(r.error) for r in results)
    followups = [r for r in results if r.question.follows]
    if followups:
        adversarial = [r.refused for r in followups if r.question.kind == "adversarial"]
        answerable = _answerable_figures([r for r in followups if r.question.kind == "answerable"])
        figures["followup"] = {
            "count": len(followups),
            **{key: value for key, value in answerable.items() if key != "count"},
            "answerable_count": answerable["count"],
            "adversarial_count": len(adversarial),
            "adversarial_refusal_rate": _rate(adversarial),
            "adversarial_flagged_rate": _rate(
                [r.flagged for r in followups if r.question.kind == "adversarial"]
            ),
        }
    return figures


def _answerable_figures(answerable: list[QuestionResult]) -> dict[str, Any]:
    """Citation accuracy, answer hit rate, false refusals and recall@1/@5 of answerable
    questions."""

    def cites_gold(texts: list[str], result: QuestionResult) -> bool:
        return any(contains_gold(t, result.question.answers) for t in texts)

    return {
        "count": len(answerable),
        "citation_accuracy": _rate([cites_gold(r.cited_texts, r) for r in answerable]),
        "answer_hit_rate": _rate(
            [contains_gold(r.content, r.question.answers) for r in answerable]
        ),
        "false_refusal_rate": _rate([r.refused for r in answerable]),
        "flagged_rate": _rate([r.flagged for r in answerable]),
        "recall_at_1": _rate([cites_gold(r.retrieved_texts[:1], r) for r in answerable]),
        "recall_at_5": _rate([cites_gold(r.retrieved_texts[:5], r) for r in answerable]),
    }


def latency_figures(results: list[QuestionResult]) -> dict[str, float]:
    first = [r.first_content_ms for r in results]
    any_first = [r.first_event_ms for r in results]
    total = [r.total_ms for r in results]
    return {
        "first_event_p50": round(statistics.median(first), 1) if first else 0.0,
        "first_event_p95": round(percentile(first, 0.95), 1),
        "first_any_event_p50": round(statistics.median(any_first), 1) if any_first else 0.0,
        "total_p50": round(statistics.median(total), 1) if total else 0.0,
        "total_p95": round(percentile(total, 0.95), 1),
    }


def _refused_at(signals: EvidenceSignals | None, threshold: float) -> bool:
    if signals is None:  # nothing retrieved
        return True
    sufficient, _ = signals_sufficient(signals, threshold=threshold, threshold_on=THRESHOLD_ON)
    return not sufficient


# The weak-support bands --calibrate replays: (log-odds edge, passage margin) pairs.
BAND_GRID = [
    (score, margin)
    for score in (0.0, 0.5, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5)
    for margin in (0.0, 0.10, 0.12, 0.14, 0.15, 0.16, 0.17, 0.18, 0.19, 0.20, 0.22, 0.24)
]


def _flagged_at(signals: EvidenceSignals | None, threshold: float, band: tuple) -> bool:
    if signals is None:
        return False
    _, reason = signals_sufficient(
        signals, threshold=threshold, threshold_on=THRESHOLD_ON, band=band
    )
    return reason == WEAK_SUPPORT


def band_calibrate(results: list[QuestionResult], threshold: float) -> list[dict[str, Any]]:
    """The evidence decision replayed (all its signals, as `dataset_evaluate(signals=True)`
    collects them) at `threshold` for every weak-support band of BAND_GRID: per band, the share
    of answerable questions flagged and of the others refused or flagged
    (docs/decisions/0034-weak-evidence-notice-band.md)."""
    by_kind: dict[str, list[EvidenceSignals | None]] = {}
    for result in results:
        by_kind.setdefault(result.question.kind, []).append(result.signals)
    rows = []
    for band in BAND_GRID:
        row: dict[str, Any] = {"score": band[0], "margin": band[1]}
        answerable = [_flagged_at(s, threshold, band) for s in by_kind.get("answerable", [])]
        row["answerable_flagged_rate"] = _rate(answerable)
        for kind in ("off_kb", "adversarial"):
            row[f"{kind}_refused_or_flagged_rate"] = _rate(
                [
                    _refused_at(s, threshold) or _flagged_at(s, threshold, band)
                    for s in by_kind.get(kind, [])
                ]
            )
        rows.append(row)
    return rows


def threshold_calibrate(
    results: list[QuestionResult], current: float, automatic: Any = None
) -> dict[str, Any]:
    """From the labels, replaying the evidence decision (all its signals, as collected by
    `dataset_evaluate(signals=True)`) at every threshold of CALIBRATION_GRID: the lowest
    threshold that refuses every off-KB question and the false refusals it costs; the highest
    that keeps false refusals at or below 3% and the off-KB share it refuses; and the current
    threshold's pair; with `automatic` (the knowledge base's own calibration, chat/calibration.py)
    also the automatic threshold's pair, to compare with the labels' optimum. Informs the
    admin's setting for their own corpus."""
    off_kb = [r.signals for r in results if r.question.kind == "off_kb"]
    answerable = [r.signals for r in results if r.question.kind == "answerable"]
    if not off_kb or not answerable:
        return {"note": "needs answerable and off_kb questions"}

    def rates(threshold: float) -> dict[str, float]:
        return {
            "threshold": threshold,
            "false_refusal_rate": _rate([_refused_at(s, threshold) for s in answerable]),
            "off_kb_refusal_rate": _rate([_refused_at(s, threshold) for s in off_kb]),
        }

    grid = [rates(threshold) for threshold in CALIBRATION_GRID]
    refuse_all = [g for g in grid if g["off_kb_refusal_rate"] == 1.0]
    keep = [g for g in grid if g["false_refusal_rate"] <= 0.03]
    report = {
        "weak_band": band_calibrate(results, current),
        "current": rates(current),
        "refuse_all_off_kb": refuse_all[0] if refuse_all else {"note": "no threshold on the grid"},
        "false_refusals_at_most_3pct": keep[-1] if keep else {"note": "no threshold on the grid"},
    }
    if automatic is not None:
        # The knowledge base's own measurement (chat/calibration.py), beside the labels' optimum.
        report["automatic"] = {
            **rates(automatic.threshold),
            "noise_floor": automatic.noise_floor,
            "probe_floor": automatic.probe_floor,
        }
    return report


def figures_table(figures: dict[str, Any]) -> str:
    """A plain-text table of the figures, overall and per kind."""
    a, off, adv, lat = (
        figures["answerable"],
        figures["off_kb"],
        figures["adversarial"],
        figures["latency_ms"],
    )
    rows = [
        ("kind", "count", "figure", "value"),
        ("answerable", a["count"], "citation accuracy", f"{a['citation_accuracy']:.1%}"),
        ("", "", "answer hit rate", f"{a['answer_hit_rate']:.1%}"),
        ("", "", "false refusals", f"{a['false_refusal_rate']:.1%}"),
        ("", "", "flagged (weak evidence)", f"{a['flagged_rate']:.1%}"),
        ("", "", "retrieval recall@1", f"{a['recall_at_1']:.1%}"),
        ("", "", "retrieval recall@5", f"{a['recall_at_5']:.1%}"),
        ("off_kb", off["count"], "refusal rate", f"{off['refusal_rate']:.1%}"),
        ("", "", "flagged (weak evidence)", f"{off['flagged_rate']:.1%}"),
        ("", "", "refused or flagged", f"{off['refused_or_flagged_rate']:.1%}"),
        ("adversarial", adv["count"], "refusal rate", f"{adv['refusal_rate']:.1%}"),
        ("", "", "flagged (weak evidence)", f"{adv['flagged_rate']:.1%}"),
        ("", "", "refused or flagged", f"{adv['refused_or_flagged_rate']:.1%}"),
    ]
    follow = figures.get("followup")
    if follow:
        rows += [
            ("follow-ups", follow["count"], "answerable", str(follow["answerable_count"])),
            ("", "", "citation accuracy", f"{follow['citation_accuracy']:.1%}"),
            ("", "", "answer hit rate", f"{follow['answer_hit_rate']:.1%}"),
            ("", "", "false refusals", f"{follow['false_refusal_rate']:.1%}"),
            ("", "", "flagged (weak evidence)", f"{follow['flagged_rate']:.1%}"),
            ("", "", "retrieval recall@1", f"{follow['recall_at_1']:.1%}"),
            ("", "", "retrieval recall@5", f"{follow['recall_at_5']:.1%}"),
            ("", "", "adversarial refused", f"{follow['adversarial_refusal_rate']:.1%}"),
            ("", "", "adversarial flagged", f"{follow['adversarial_flagged_rate']:.1%}"),
        ]
    rows += [
        ("all", figures["questions"], "first event p50 / p95", _pair(lat, "first_event")),
        ("", "", "total p50 / p95", _pair(lat, "total")),
    ]
    for kind in ("answerable", "off_kb", "adversarial"):
        kind_latency = figures.get(kind, {}).get("latency_ms")
        if kind_latency and figures[kind]["count"]:
            rows.append((kind, "", "first event p50 / p95", _pair(kind_latency, "first_event")))
    widths = [max(len(str(row[i])) for row in rows) for i in range(4)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def _pair(latency: dict[str, float], key: str) -> str:
    return f"{latency[key + '_p50']:.0f} / {latency[key + '_p95']:.0f} ms"


# --- Folds: the knowledge base without some of its articles --------------------------------------
# Figures where a higher value is better; the others (false refusals, latencies) are worse higher.
LOWER_IS_BETTER = ("false_refusal_rate", "answerable.flagged_rate", "_p50", "_p95")


def folds_assign(dataset: Dataset, folds: int) -> list[list[str]]:
    """The dataset's document ids split into `folds` folds of near-equal size: documents in file
    order dealt round-robin (deterministic, so two runs leave out the same articles)."""
    if folds < 2:
        raise ValueError("folds must be 2 or more")
    if folds > len(dataset.documents):
        raise ValueError(
            f"{folds} folds need at least {folds} documents; the dataset has "
            f"{len(dataset.documents)}."
        )
    assigned: list[list[str]] = [[] for _ in range(folds)]
    for i, document in enumerate(dataset.documents):
        assigned[i % folds].append(document.id)
    return assigned


def fold_questions(questions: list[DatasetQuestion], left_out: set[str]) -> list[DatasetQuestion]:
    """The questions as they read with `left_out` documents out of the knowledge base: a question
    about one of them (answerable or adversarial) becomes an off-KB one — the only right response
    is a refusal. A follow-up keeps its place after the question it follows."""
    result = []
    for question in questions:
        if question.document in left_out and question.kind != "off_kb":
            question = DatasetQuestion(
                id=question.id,
                question=question.question,
                expect="refusal",
                kind="off_kb",
                document=question.document,
                answers=(),
                follows=question.follows,
            )
        result.append(question)
    return result


def documents_by_dataset_id(dataset: Dataset) -> dict[str, list[int]]:
    """Dataset document id → the ids of the knowledge base's documents ingested from it (matched
    by file name, as `dataset_ingest` wrote them)."""
    from knowledge.models import Document

    by_name: dict[str, list[int]] = {}
    for pk, source in Document.objects.values_list("pk", "source"):
        by_name.setdefault(Path(source).name, []).append(pk)
    return {d.id: by_name.get(d.file_name, []) for d in dataset.documents}


@contextmanager
def documents_left_out(dataset: Dataset, left_out: list[str]) -> Iterator[None]:
    """The knowledge base without the `left_out` documents: disabled (retrieval, the vocabulary
    and the evidence check read only enabled documents: the same as never ingesting them,
    without embedding anything again), enabled again afterwards; the vocabulary is rebuilt on
    both changes, not served stale for the first questions."""
    from knowledge.services import documents_set_enabled
    from knowledge.vocabulary import vocabulary_get

    ids = [pk for doc in left_out for pk in documents_by_dataset_id(dataset).get(doc, [])]
    documents_set_enabled(ids=ids, enabled=False)
    try:
        vocabulary_get(reader=OPERATOR, wait=True)
        yield
    finally:
        documents_set_enabled(ids=ids, enabled=True)
        vocabulary_get(reader=OPERATOR, wait=True)


def fold_evaluate(
    dataset: Dataset,
    left_out: list[str],
    *,
    questions: list[DatasetQuestion] | None = None,
    progress: Callable[[int], None] | None = None,
    signals: bool = False,
) -> list[QuestionResult]:
    """`dataset_evaluate` with the `left_out` documents out of the knowledge base."""
    with documents_left_out(dataset, left_out):
        asked = fold_questions(
            questions if questions is not None else dataset.questions, set(left_out)
        )
        return dataset_evaluate(dataset, questions=asked, progress=progress, signals=signals)


def fold_calibration(dataset: Dataset, left_out: list[str]) -> Any:
    """The automatic calibration of the knowledge base without the `left_out` documents."""
    from chat.calibration import calibration_refresh

    with documents_left_out(dataset, left_out):
        return calibration_refresh()


def figures_flatten(figures: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Every numeric figure as "group.name" → value (counts and thresholds included)."""
    flat: dict[str, float] = {}
    for key, value in figures.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(figures_flatten(value, prefix=name + "."))
        elif isinstance(value, int | float) and not isinstance(value, bool):
            flat[name] = float(value)
    return flat


def folds_summary(per_fold: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Mean and worst fold of every numeric figure: "worst" is the lowest value for a rate where
    higher is better, the highest for false refusals and latencies."""
    flats = [figures_flatten(f) for f in per_fold]
    names = [name for name in flats[0] if all(name in flat for flat in flats)]
    mean: dict[str, float] = {}
    worst: dict[str, float] = {}
    for name in names:
        values = [flat[name] for flat in flats]
        mean[name] = round(statistics.fmean(values), 4)
        higher_is_worse = any(marker in name for marker in LOWER_IS_BETTER)
        worst[name] = max(values) if higher_is_worse else min(values)
    return {"mean": mean, "worst": worst}


FOLD_TABLE_ROWS = (
    ("answerable.citation_accuracy", "citation accuracy"),
    ("answerable.answer_hit_rate", "answer hit rate"),
    ("answerable.false_refusal_rate", "false refusals"),
    ("answerable.flagged_rate", "answerable flagged"),
    ("answerable.recall_at_1", "retrieval recall@1"),
    ("answerable.recall_at_5", "retrieval recall@5"),
    ("off_kb.refusal_rate", "off-KB refused"),
    ("off_kb.flagged_rate", "off-KB flagged"),
    ("off_kb.refused_or_flagged_rate", "off-KB refused or flagged"),
    ("held_out.refusal_rate", "left-out articles refused"),
    ("held_out.flagged_rate", "left-out articles flagged"),
    ("held_out.refused_or_flagged_rate", "left-out refused or flagged"),
    ("adversarial.refusal_rate", "adversarial refused"),
    ("adversarial.flagged_rate", "adversarial flagged"),
    ("latency_ms.total_p50", "total p50 (ms)"),
)


def folds_table(per_fold: list[dict[str, Any]], summary: dict[str, dict[str, float]]) -> str:
    """One row per figure, one column per fold, then the mean and the worst fold."""
    flats = [figures_flatten(f) for f in per_fold]
    header = ["figure", *[f"fold {i + 1}" for i in range(len(per_fold))], "mean", "worst"]
    rows = [header]
    for key, label in FOLD_TABLE_ROWS:
        values = [flat.get(key) for flat in flats] + [
            summary["mean"].get(key),
            summary["worst"].get(key),
        ]
        if key.startswith("latency"):
            rows.append([label, *["-" if v is None else f"{v:.0f}" for v in values]])
        else:
            rows.append([label, *["-" if v is None else f"{v:.1%}" for v in values]])
    counts = [
        "questions (answerable / off-KB)",
        *[f"{f['answerable']['count']}/{f['off_kb']['count']}" for f in per_fold],
        "",
        "",
    ]
    rows.append(counts)
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def held_out_figures(results: list[QuestionResult], original: dict[str, str]) -> dict[str, Any]:
    """Refusal and flagged rates of the questions turned off-KB because their article was left
    out (`original`: question id → its kind in the dataset)."""
    group = [
        r
        for r in results
        if r.question.kind == "off_kb" and original.get(r.question.id) != "off_kb"
    ]
    return {"count": len(group), **_unanswerable_rates(group)}


def _unanswerable_rates(group: list[QuestionResult]) -> dict[str, float]:
    """Of questions the documents do not answer: refused, flagged (answered with the
    weak-evidence notice), and either."""
    return {
        "refusal_rate": _rate([r.refused for r in group]),
        "flagged_rate": _rate([r.flagged for r in group]),
        "refused_or_flagged_rate": _rate([r.refused or r.flagged for r in group]),
    }
