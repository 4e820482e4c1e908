"""A numbered heading or a page number is never quoted as a sentence of an answer: the demo's
PDF asked through the real pipeline (retrieval, the evidence check, the extractive answer)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from knowledge.access import OPERATOR

DEMO_PDF = Path(__file__).resolve().parents[3] / "demo" / "expenses-and-travel-policy.pdf"
_MARKER = re.compile(r"\s*\[\d+\]")


def answer_sentences(question: str) -> list[str]:
    """The extractive answer to `question` over the ingested documents, cut at its citation
    markers: one quoted sentence per piece."""
    from chat.answering.evidence import evidence_threshold
    from chat.answering.evidence_signals import THRESHOLD_ON, evidence_assess, evidence_outcome
    from chat.answering.extractive import extractive_answer, sentence_vectors_preload
    from knowledge.retrieval import chunks_search

    search = chunks_search(reader=OPERATOR, query=question, top_k=5)
    sentence_vectors_preload(search.chunks)
    threshold = evidence_threshold()
    decision = evidence_assess(
        reader=OPERATOR,
        question=question,
        question_vector=search.query_vector,
        chunks=search.chunks,
        threshold=threshold,
        threshold_on=THRESHOLD_ON,
    )
    chunks, refusal = evidence_outcome(search.chunks, decision, threshold)
    assert refusal is None, question
    answer = extractive_answer(
        question=question, question_vector=search.query_vector, chunks=chunks
    )
    return [piece.strip() for piece in _MARKER.split(answer.text) if piece.strip()]


@pytest.fixture
def expenses_pdf(db):
    from knowledge.services import documents_ingest

    outcomes = documents_ingest(paths=[DEMO_PDF], title=None, enabled=True, dry_run=False)
    assert [outcome.error for outcome in outcomes] == [""]


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What is the daily meal allowance abroad?", "dinner GBP 35"),
        ("How much can I spend on a hotel in London?", "GBP 150 per night"),
        ("What class can I fly on a short flight?", "economy class"),
    ],
)
def test_pdf_answer_quotes_sentences_never_a_heading_or_page_number(expenses_pdf, question, answer):
    sentences = answer_sentences(question)

    assert any(answer in sentence for sentence in sentences), sentences
    for sentence in sentences:
        assert sentence.endswith((".", "!", "?", ".)", '."')), sentences
        assert "Meals and subsistence" not in sentence
        assert not re.search(r"Page \d+ of \d+", sentence), sentences
