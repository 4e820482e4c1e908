"""Follow-up figures per kind of follow-up, what the planner searched for the failures, and a
constant of chat/answering/followups.py chosen on folds
(docs/decisions/0031-follow-ups-by-kind.md).

A dataset labels the kind of a follow-up in a field the dataset loader ignores,
`followup_kind` (e.g. "aspect", "more", "reply", "pronoun"); a follow-up without one counts as
"unlabelled".
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chat.answering import followups
from lab.evaluation.dataset import DatasetError, contains_gold
from lab.evaluation.runner import QuestionResult, _answerable_figures, _rate

UNLABELLED = "unlabelled"


def followup_kinds_read(path: Path) -> dict[str, str]:
    """question id → its `followup_kind`, for the follow-ups of the dataset file at `path`
    ("unlabelled" when a follow-up has none). DatasetError when the file cannot be read (the
    loader, lab/evaluation/dataset.py, reports the rest)."""
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"Cannot read {path}: {exc}") from exc
    kinds = {}
    for i, item in enumerate(raw.get("questions") or [] if isinstance(raw, dict) else []):
        if isinstance(item, dict) and item.get("follows") is not None:
            kinds[str(item.get("id") or i)] = str(item.get("followup_kind") or UNLABELLED)
    return kinds


AFTER_AN_ANSWER = "after an answer"  # the follow-ups whose previous question was answered


def figures_by_kind(
    results: Sequence[QuestionResult], kinds: dict[str, str]
) -> dict[str, dict[str, Any]]:
    """The answerable follow-ups' figures (citation accuracy, answer hit rate, false refusals,
    recall@1/@5: lab/evaluation/runner.py) per kind, over all of them under "all", and over
    those whose previous question was answered (not refused) under AFTER_AN_ANSWER: what the
    follow-up's reading does, apart from the first question's own refusals."""
    refused = {result.question.id: result.refused for result in results}
    groups: dict[str, list[QuestionResult]] = {}
    for result in results:
        question = result.question
        if question.follows is None or question.kind != "answerable":
            continue
        groups.setdefault(kinds.get(question.id, UNLABELLED), []).append(result)
        groups.setdefault("all", []).append(result)
        if not refused.get(question.follows, True):
            groups.setdefault(AFTER_AN_ANSWER, []).append(result)
    return {kind: _answerable_figures(group) for kind, group in sorted(groups.items())}


def adversarial_figures(results: Sequence[QuestionResult]) -> dict[str, Any]:
    """How many follow-ups are adversarial (the documents do not answer them), the share
    refused and the share answered with the weak-evidence notice."""
    adversarial = [r for r in results if r.question.follows and r.question.kind == "adversarial"]
    return {
        "count": len(adversarial),
        "refusal_rate": _rate([r.refused for r in adversarial]),
        "flagged_rate": _rate([r.flagged for r in adversarial]),
    }


@dataclass(frozen=True)
class Failure:
    """An answerable follow-up that was refused or did not cite its gold answer."""

    id: str
    kind: str
    previous: str  # the question it follows
    question: str
    search_query: str  # what the pipeline searched for
    refused: bool
    evidence: str = ""  # the evidence check's reason, when known


class ExchangeReasons(logging.Handler):
    """Collects the evidence check's reason of every exchange from the `sourced.exchange` log
    (chat/answering/trace.py), keyed by conversation, the latest last; while installed
    (`with`), those lines are not passed on."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.by_conversation: dict[str, list[str]] = {}
        self._logger = logging.getLogger("sourced.exchange")

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = json.loads(record.getMessage())
        except (TypeError, ValueError):
            return
        conversation = str(line.get("conversation", ""))
        self.by_conversation.setdefault(conversation, []).append(str(line.get("evidence", "")))

    def __enter__(self) -> ExchangeReasons:
        self._saved = (self._logger.level, self._logger.propagate)
        self._logger.setLevel(logging.INFO)
        self._logger.propagate = False
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._saved[0])
        self._logger.propagate = self._saved[1]


def failures_list(
    results: Sequence[QuestionResult],
    kinds: dict[str, str],
    reasons: dict[str, list[str]] | None = None,
) -> list[Failure]:
    """The failed answerable follow-ups, in the dataset's order; `reasons` (conversation → the
    evidence reasons of its exchanges, in order: `ExchangeReasons`) adds each one's."""
    asked = {result.question.id: result.question.question for result in results}
    position: dict[str, int] = {}
    failed = []
    for result in results:
        question = result.question
        turn = position[result.conversation_id] = position.get(result.conversation_id, -1) + 1
        if question.follows is None or question.kind != "answerable":
            continue
        if any(contains_gold(text, question.answers) for text in result.cited_texts):
            continue
        said = (reasons or {}).get(result.conversation_id, [])
        failed.append(
            Failure(
                id=question.id,
                kind=kinds.get(question.id, UNLABELLED),
                previous=asked.get(question.follows, ""),
                question=question.question,
                search_query=result.search_query,
                refused=result.refused,
                evidence=said[turn] if turn < len(said) else "",
            )
        )
    return failed


def kinds_table(by_kind: dict[str, dict[str, Any]]) -> str:
    """A plain-text table: one row per kind."""
    header = ("kind", "count", "citation", "hit", "refused", "flagged", "r@1", "r@5")
    rows = [header]
    for kind, f in by_kind.items():
        rows.append(
            (
                kind,
                str(f["count"]),
                *(
                    f"{f[key]:.1%}"
                    for key in (
                        "citation_accuracy",
                        "answer_hit_rate",
                        "false_refusal_rate",
                        "flagged_rate",
                        "recall_at_1",
                        "recall_at_5",
                    )
                ),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


def constant_check(name: str) -> None:
    """ValueError when chat/answering/followups.py has no numeric upper-case constant `name`."""
    if not name.isupper() or not isinstance(getattr(followups, name, None), int | float):
        raise ValueError(f"chat/answering/followups.py has no numeric constant {name!r}")


@contextmanager
def constant_set(name: str, value: float) -> Iterator[None]:
    """Set the constant `name` of chat/answering/followups.py to `value` for the block (the
    planner reads its constants when it runs). ValueError when the module has no such
    upper-case constant."""
    constant_check(name)
    old = getattr(followups, name)
    setattr(followups, name, type(old)(value))
    try:
        yield
    finally:
        setattr(followups, name, old)


def score(figures: dict[str, Any]) -> float:
    """What a constant is chosen for: citation accuracy less false refusals."""
    return figures["citation_accuracy"] - figures["false_refusal_rate"]


def constant_choose_on_folds(
    runs: dict[float, list[QuestionResult]],
    kinds: dict[str, str],
    folds: list[list[str]],
    *,
    figures_of: Callable[[Sequence[QuestionResult], dict[str, str]], dict] = figures_by_kind,
) -> list[dict[str, Any]]:
    """For each fold (a list of document ids), the value of `runs` (value → the results of a
    whole run with the constant at that value) that scores best (`score`, ties to the smaller
    value) on the follow-ups of the *other* folds' documents, and the held-out fold's figures at
    that value."""

    def split(results: list[QuestionResult], fold: list[str], inside: bool) -> list:
        return [r for r in results if (r.question.document in fold) == inside]

    report = []
    for held_out in folds:
        chosen = max(
            sorted(runs),
            key=lambda value: score(figures_of(split(runs[value], held_out, False), kinds)["all"]),
        )
        report.append(
            {
                "held_out": held_out,
                "chosen": chosen,
                "train": figures_of(split(runs[chosen], held_out, False), kinds)["all"],
                "held_out_figures": figures_of(split(runs[chosen], held_out, True), kinds),
            }
        )
    return report
