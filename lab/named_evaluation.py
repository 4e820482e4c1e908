"""The figures of `manage.py evaluate` split by whether a question names a document, and which
document the answers say they searched: on a dataset whose questions carry `names` (the id of
the document they name, or null; demo/eval/named.json), in a throwaway knowledge base.

    .venv/bin/python -m lab.named_evaluation demo/eval/named.json [--json figures.json]

Groups: `named` (answerable, naming the document that holds the answer), `named_elsewhere`
(answerable, naming a document that does not hold it), `named_refusal` (naming a document,
answered by none), and their twins without the name (`unnamed`, …); `near_miss`: questions
using a name's words without naming a document. `searched_right`: share of answers in the
group whose `searched_document` is the named document; `searched_none`: share with none.
`--margin`, `--named-only` and the per-question outcomes in `--json` serve to choose
NAMED_MARGIN (`lab.named_margin`).
(docs/decisions/0037-a-question-that-names-a-document.md)
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
import uuid
from pathlib import Path


def _setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--margin",
        type=float,
        default=None,
        help="chat.answering.search.NAMED_MARGIN for this run (to choose it: lab.named_margin).",
    )
    parser.add_argument(
        "--named-only", action="store_true", help="Ask only the questions naming a document."
    )
    args = parser.parse_args()
    _setup()
    if args.margin is not None:
        from chat.answering import search

        search.NAMED_MARGIN = args.margin
    from asgiref.sync import async_to_sync
    from django.contrib.auth import get_user_model

    from chat.answering.pipeline import AnswerOptions, answer_stream
    from chat.models import ChatSettings
    from knowledge.models import Document
    from lab.evaluation.dataset import contains_gold, dataset_load
    from lab.evaluation.isolated import isolated_database
    from lab.evaluation.runner import QuestionResult, dataset_ingest, figures_compute

    dataset = dataset_load(args.dataset)
    raw = {q["id"]: q for q in json.loads(args.dataset.read_text())["questions"]}
    logging.getLogger("sourced.exchange").setLevel(logging.WARNING)

    async def ask(user, question) -> tuple[QuestionResult, str | None]:
        result, searched = QuestionResult(question=question), None
        started = time.perf_counter()
        async for event in answer_stream(
            user=user,
            question=question.question,
            message_id=uuid.uuid4(),
            options=AnswerOptions(),
        ):
            if event.type == "refusal":
                result.refused = True
            elif event.type == "answer_delta":
                result.content += event.data["text"]
            elif event.type == "sources":
                result.cited_texts = [
                    c.get("text") or c["excerpt"] for c in event.data["citations"]
                ]
                searched = (event.data.get("searched_document") or {}).get("title")
            elif event.type == "error":
                result.error = event.data.get("code", "error")
        result.total_ms = result.first_content_ms = (time.perf_counter() - started) * 1000
        return result, searched

    with isolated_database("sourced_named"):
        dataset_ingest(dataset)
        ChatSettings.objects.update_or_create(pk=1, defaults={"generation_mode": "extractive"})
        user, _ = get_user_model().objects.get_or_create(
            username="evaluation", defaults={"is_staff": True}
        )
        titles = {
            Path(source).stem: title
            for source, title in Document.objects.values_list("source", "title")
        }
        questions = [q for q in dataset.questions if not args.named_only or raw[q.id].get("names")]
        outcomes = [(q, *async_to_sync(ask)(user, q)) for q in questions]

    def group_of(question) -> str:
        item = raw[question.id]
        named_twin = raw.get(question.id.rstrip("u"), {}).get("names")
        if question.id.endswith("u"):
            prefix = "unnamed"
        elif item.get("names"):
            prefix = "named"
        else:
            return "near_miss"
        names = item.get("names") or named_twin
        if question.kind != "answerable":
            return f"{prefix}_refusal"
        return prefix if question.document == names else f"{prefix}_elsewhere"

    groups: dict[str, list] = {}
    for outcome in outcomes:
        groups.setdefault(group_of(outcome[0]), []).append(outcome)
    figures = {}
    for name, members in sorted(groups.items()):
        computed = figures_compute(name, [result for _, result, _ in members])
        expected = [titles.get(raw[q.id].get("names") or "", "") for q, _, _ in members]
        searched = [s for _, _, s in members]
        figures[name] = {
            "questions": len(members),
            "answerable": {
                k: v for k, v in computed["answerable"].items() if not k.startswith("recall")
            },
            "refusal_rate": round(sum(r.refused for _, r, _ in members) / len(members), 4),
            "searched_right": round(
                sum(bool(e) and s == e for e, s in zip(expected, searched, strict=True))
                / len(members),
                4,
            ),
            "searched_none": round(sum(s is None for s in searched) / len(members), 4),
            "errors": computed["errors"],
        }
        print(name, json.dumps(figures[name]))
    figures["per_question"] = {
        q.id: {
            "group": group_of(q),
            "refused": r.refused,
            "hit": contains_gold(r.content, q.answers) if q.answers else None,
            "cites": any(contains_gold(t, q.answers) for t in r.cited_texts) if q.answers else None,
            "searched": s,
        }
        for q, r, s in outcomes
    }
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
