"""The shortlist recall measure of docs/decisions/0078-a-shortlist-on-the-vectors-signs.md."""

from __future__ import annotations

import numpy as np

from lab.benchmark.shortlist_recall import shortlist_recall


def _unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_a_shortlist_of_every_row_finds_the_exact_top_5():
    generator = np.random.default_rng(7)
    rows, questions = (
        _unit(generator.normal(size=(300, 32))),
        _unit(generator.normal(size=(20, 32))),
    )
    assert shortlist_recall(rows, questions, size=300) == 1.0


def test_a_shortlist_ranked_by_signs_misses_rows_whose_signs_differ():
    question = np.array([[1.0, 1.0, 1.0, 1.0]]) / 2
    rows = _unit(
        np.array(
            [
                [1.0, 1.0, 1.0, -0.01],  # nearest by cosine, one sign differs
                [1.0, 0.01, 0.01, 0.01],  # every sign equal, further by cosine
                [0.01, 1.0, 0.01, 0.01],
                [0.01, 0.01, 1.0, 0.01],
                [0.01, 0.01, 0.01, 1.0],
                [1.0, 1.0, 0.01, 0.01],
            ]
        )
    )
    assert shortlist_recall(rows, question, size=5, top=1) == 0.0
    assert shortlist_recall(rows, question, size=6, top=1) == 1.0
