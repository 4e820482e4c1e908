"""How well `chat.answering.named_documents` finds the document a question names, without
asking anything: on a dataset whose questions carry `names` (the id of the document they
name, or null: demo/eval/named.json), the share found right per coverage threshold, the
threshold chosen on folds and scored on the fold left out; on any dataset, how many
questions are taken to name a document (for questions naming none, it should be none).

    .venv/bin/python -m lab.named_detection demo/eval/named.json [--folds 5]
    .venv/bin/python -m lab.named_detection demo/eval/policies.json

Documents are named as `manage.py evaluate` ingests them: their parsed title (else the title
made from the file name) and the file name it writes (docs/decisions/0037-…).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def dataset_names(path: Path) -> list:
    """The dataset's documents as `DocumentNames`, ids by position (1, 2, …), keyed back to
    the dataset's ids by their `names[1]` (the file name's stem)."""
    from chat.answering.named_documents import DocumentNames
    from knowledge.parsers import document_parse
    from knowledge.services.ingest import title_from_name
    from lab.evaluation.dataset import dataset_load

    dataset = dataset_load(path)
    documents = []
    for number, document in enumerate(dataset.documents, start=1):
        data = document.path.read_bytes() if document.path else document.text.encode()
        parsed = document_parse(data=data, name=document.file_name)
        title = parsed.title or title_from_name(document.file_name)
        documents.append(
            DocumentNames(id=number, title=title, names=(title, Path(document.file_name).stem))
        )
    return dataset, documents


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args()
    _setup()
    from chat.answering.named_documents import NAME_COVERAGE, named_document_match

    dataset, documents = dataset_names(args.dataset)
    by_number = {d.id: dataset.documents[d.id - 1].id for d in documents}
    raw = {q["id"]: q for q in json.loads(args.dataset.read_text())["questions"]}
    labelled = "names" in next(iter(raw.values()))

    def found(question: str, threshold: float) -> str | None:
        match = named_document_match(question, documents, coverage=threshold)
        return by_number[match.id] if match else None

    started = time.perf_counter()
    named = [q for q in dataset.questions if found(q.question, NAME_COVERAGE)]
    ms = (time.perf_counter() - started) * 1000 / len(dataset.questions)
    print(
        f"{len(named)} of {len(dataset.questions)} questions name a document "
        f"(coverage {NAME_COVERAGE}; {ms:.2f} ms a question)"
    )
    for q in named[:20]:
        print(f"  {q.id}: {found(q.question, NAME_COVERAGE)} ← {q.question}")
    if not labelled:
        return

    def accuracy(ids: list[str], threshold: float) -> float:
        return sum(found(raw[i]["question"], threshold) == raw[i]["names"] for i in ids) / len(ids)

    ids = sorted(raw)
    print("threshold: " + "  ".join(f"{t}: {accuracy(ids, t):.3f}" for t in THRESHOLDS))
    # Twins (nm-01, nm-01u) stay in the same fold.
    groups = sorted({i.rstrip("u") for i in ids})
    folds = [
        [i for i in ids if groups.index(i.rstrip("u")) % args.folds == k] for k in range(args.folds)
    ]
    # Ties go to the highest threshold: fewer questions naming none are taken for a name.
    held = []
    for k, test in enumerate(folds):
        train = [i for i in ids if i not in test]
        best = max(THRESHOLDS, key=lambda t: (accuracy(train, t), t))
        held.append(accuracy(test, best))
        print(
            f"fold {k + 1}: chosen {best} (train {accuracy(train, best):.3f}), "
            f"held out {held[-1]:.3f} on {len(test)}"
        )
    print(f"held-out accuracy, mean of folds: {sum(held) / len(held):.3f}")
    wrong = [i for i in ids if found(raw[i]["question"], NAME_COVERAGE) != raw[i]["names"]]
    for i in wrong:
        print(
            f"  wrong {i}: found {found(raw[i]['question'], NAME_COVERAGE)}, "
            f"labelled {raw[i]['names']} ← {raw[i]['question']}"
        )


if __name__ == "__main__":
    main()
