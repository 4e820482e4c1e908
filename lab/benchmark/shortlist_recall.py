"""Recall of the row-by-row k-NN's shortlist on real text
(docs/decisions/0078-a-shortlist-on-the-vectors-signs.md): the sentences of the given datasets'
documents and their answerable questions are embedded; for each shortlist size, the share of
each question's exact top 5 (by cosine) found among the top 5 of the shortlist nearest by the
vectors' signs (the database's `binary_quantize` rule: 1 where positive).

    .venv/bin/python -m lab.benchmark.shortlist_recall DATASET.json [DATASET.json ...]
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence

import numpy as np

SENTENCE_MIN_CHARS = 40
QUESTIONS_PER_DATASET = 300
SHARES = (0.01, 0.02, 0.04, 0.05, 0.10)
SIZES = (80, 200, 400, 800)


def shortlist_recall(rows: np.ndarray, questions: np.ndarray, size: int, top: int = 5) -> float:
    """Mean share of each question's exact `top` rows found in the `top` nearest of the
    `size` rows nearest by Hamming distance of the signs (ties by position)."""
    row_signs = rows > 0
    found = 0.0
    for question in questions:
        exact = set(np.argsort(-(rows @ question), kind="stable")[:top])
        hamming = (row_signs != (question > 0)).sum(axis=1)
        shortlist = np.lexsort((np.arange(len(rows)), hamming))[:size]
        nearest = shortlist[np.argsort(-(rows[shortlist] @ question), kind="stable")][:top]
        found += len(exact & set(nearest)) / top
    return found / len(questions)


def _texts(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    sentences: list[str] = []
    questions: list[str] = []
    for path in paths:
        with open(path, encoding="utf-8") as file:
            dataset = json.load(file)
        for document in dataset["documents"]:
            text = document.get("text") or ""
            sentences += [
                s for s in re.split(r"(?<=[.!?])\s+", text) if len(s) > SENTENCE_MIN_CHARS
            ]
        answerable = [q["question"] for q in dataset["questions"] if q.get("expect") == "answer"]
        questions += answerable[:QUESTIONS_PER_DATASET]
    return sentences, questions


def main(paths: Sequence[str]) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from knowledge import embedding

    sentences, questions = _texts(paths)
    rows = embedding.embed_texts(sentences)
    vectors = embedding.embed_texts(questions)
    print(f"{len(sentences)} sentences, {len(questions)} questions")
    sizes = sorted({*SIZES, *(max(1, round(share * len(rows))) for share in SHARES)})
    for size in sizes:
        recall = shortlist_recall(rows, vectors, size)
        share = 100 * size / len(rows)
        print(f"shortlist {size:5d} ({share:4.1f} %): recall of top 5 {recall:.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
