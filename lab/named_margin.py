"""Choose chat.answering.search.NAMED_MARGIN on folds, from the per-question outcomes of
`lab.named_evaluation --named-only --margin M --json F` run once per candidate margin:

    .venv/bin/python -m lab.named_margin 0=margin-0.json 0.05=margin-0.05.json … [--folds 5]

A margin scores, on a set of questions, the share answered right (the gold passage cited, or
refused when nothing holds the answer), then the share of those naming the document that
holds the answer whose answer says it searched it. For each fold, the margin best on the
other folds (ties: the smallest) is scored on the fold (twins and groups as in demo/eval/named.json;
docs/decisions/0037-a-question-that-names-a-document.md).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def score(outcomes: dict[str, dict], ids: list[str]) -> tuple[float, float]:
    """(share of questions answered right: the gold passage cited, or refused when nothing
    holds the answer; share of the questions naming the document holding the answer whose
    answer says it searched it)."""
    right = [
        bool(outcomes[i]["cites"]) if outcomes[i]["hit"] is not None else outcomes[i]["refused"]
        for i in ids
    ]
    named = [i for i in ids if outcomes[i]["group"] == "named"]
    said = [outcomes[i]["searched"] is not None for i in named]
    return (
        round(sum(right) / len(right), 4) if right else 0.0,
        round(sum(said) / len(said), 4) if said else 0.0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="MARGIN=FILE")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    runs = {}
    for item in args.runs:
        margin, _, path = item.partition("=")
        runs[float(margin)] = json.loads(Path(path).read_text())["per_question"]
    ids = sorted(next(iter(runs.values())))
    for margin, outcomes in sorted(runs.items()):
        print(f"margin {margin}: all {score(outcomes, ids)}")
    held = []
    for k in range(args.folds):
        test = [i for n, i in enumerate(ids) if n % args.folds == k]
        train = [i for i in ids if i not in test]
        best = max(sorted(runs), key=lambda m: (score(runs[m], train), -m))
        held.append(score(runs[best], test))
        print(
            f"fold {k + 1}: chosen {best} (train {score(runs[best], train)}), "
            f"held out {held[-1]} on {len(test)}"
        )
    means = [round(sum(h[n] for h in held) / len(held), 4) for n in range(2)]
    print(f"held-out scores, mean of folds: {means}")


if __name__ == "__main__":
    main()
