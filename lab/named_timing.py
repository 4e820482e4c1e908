"""What finding a named document costs a question (`named_document_find`): timed 50 times in a
throwaway database holding 7, then 300 documents, for a question naming one and one naming
none; then the query of titles and the matching apart, for 300 documents.

    .venv/bin/python -m lab.named_timing

(docs/decisions/0037-a-question-that-names-a-document.md)
"""

from __future__ import annotations

import os
import time

QUESTIONS = (
    "In the staff handbook, how is overtime paid?",
    "How many days of annual leave do I get?",
)
TITLES = [
    "Northwind Analytics Staff Handbook",
    "IT Helpdesk FAQ",
    "IT Security Policy: Passwords and Devices",
    "Northwind Analytics Expenses and Travel Policy",
    "Customer Refund Policy",
    "it-equipment-stock.xlsx",
    "Northwind Analytics all-hands, Q1 2026",
]
ROUNDS = 50


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000 / ROUNDS, 2)


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from chat.answering.named_documents import (
        document_names_build,
        named_document_find,
        named_document_match,
    )
    from knowledge.access import OPERATOR
    from knowledge.models import Document
    from knowledge.search_scope import searchable_documents
    from lab.evaluation.isolated import isolated_database

    with isolated_database("sourced_named_timing"):
        for count in (7, 300):
            Document.objects.all().delete()
            Document.objects.bulk_create(
                Document(
                    title=TITLES[i] if i < len(TITLES) else f"Team {i} onboarding guide",
                    source=f"/documents/doc-{i}.md",
                    media_type="text/markdown",
                    status=Document.Status.READY,
                )
                for i in range(count)
            )
            for question in QUESTIONS:
                named_document_find(question, reader=OPERATOR)
                started = time.perf_counter()
                for _ in range(ROUNDS):
                    named_document_find(question, reader=OPERATOR)
                print(f"{count} documents: {_ms(started)} ms  {question}")
        columns = ("pk", "title", "source", "metadata__original_name", "owner_id")
        started = time.perf_counter()
        for _ in range(ROUNDS):
            rows = list(searchable_documents(reader=OPERATOR).order_by().values_list(*columns))
        print(f"300 documents: the query {_ms(started)} ms")
        documents = document_names_build(rows)
        started = time.perf_counter()
        for _ in range(ROUNDS):
            named_document_match(QUESTIONS[1], documents)
        print(f"300 documents: the matching {_ms(started)} ms")


if __name__ == "__main__":
    main()
