"""The named-document question set and the lab's margin chooser
(docs/decisions/0037-a-question-that-names-a-document.md)."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings

from lab.evaluation.dataset import dataset_load
from lab.named_margin import score

NAMED = Path(settings.BASE_DIR) / "demo" / "eval" / "named.json"


def test_the_named_set_loads_and_names_only_its_documents():
    dataset = dataset_load(NAMED)
    ids = {document.id for document in dataset.documents}
    raw = json.loads(NAMED.read_text())["questions"]

    assert len(raw) == len(dataset.questions)
    assert all(q["names"] is None or q["names"] in ids for q in raw)
    named = {q["id"] for q in raw if q["names"]}
    # Every question naming a document has its twin without the name, naming none.
    twins = {q["id"]: q for q in raw if q["id"].endswith("u")}
    assert all(twins[f"{i}u"]["names"] is None for i in named)


def test_a_margin_scores_right_answers_then_answers_saying_the_named_document():
    outcomes = {
        "a": {"group": "named", "hit": True, "cites": True, "refused": False, "searched": "X"},
        "b": {"group": "named", "hit": False, "cites": False, "refused": False, "searched": None},
        "c": {"group": "named_refusal", "hit": None, "cites": None, "refused": True},
        "d": {"group": "named_refusal", "hit": None, "cites": None, "refused": False},
    }
    outcomes["c"]["searched"] = outcomes["d"]["searched"] = None

    assert score(outcomes, ["a", "b", "c", "d"]) == (0.5, 0.5)
    assert score(outcomes, ["a", "c"]) == (1.0, 1.0)
