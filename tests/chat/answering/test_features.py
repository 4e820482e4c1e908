"""The evidence features beyond one cosine (chat/answering/features.py)."""

from __future__ import annotations

import pytest

from chat.answering.answer_types import answer_matches, expected_answer
from chat.answering.features import (
    answer_type,
    compared_sentences,
    generic_questions,
    term_coverage,
    type_matches,
)
from knowledge.retrieval import RetrievedChunk
from knowledge.vocabulary import QuestionTerm, QuestionTerms


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("When was the tower lit?", "when"),
        ("In what year did the Normans arrive?", "when"),
        ("How many days of annual leave do I get?", "number"),
        ("How much can I spend on a hotel?", "number"),
        ("How long do card refunds take?", "number"),
        ("Who designed the tower?", "who"),
        ("What is the password manager?", ""),
        ("Where is the helpdesk?", ""),
    ],
)
def test_answer_type_of_a_question(question, kind):
    assert answer_type(question) == kind


def test_a_sentence_matches_the_answer_type_it_holds():
    assert type_matches("when", "The present tower was lit in 1882.")
    assert type_matches("when", "Carried-over days must be taken by 31 March.")
    assert not type_matches("when", "The tower stands on rocks south of the harbour.")
    assert type_matches("number", "Every employee receives twenty-five days.")
    assert type_matches("number", "The limit is GBP 150 per night.")
    assert not type_matches("number", "Rail is the preferred way to travel.")
    assert type_matches("who", "The tower was designed by James Douglass.")
    assert type_matches("who", "Refunds need approval from the finance director.")
    assert not type_matches("who", "Honey is made from nectar in the comb.")
    assert type_matches("", "Anything at all.")


def term(token: str, idf: float, *, known: bool = True) -> QuestionTerm:
    return QuestionTerm(
        lexeme=token.lower(),
        token=token,
        known=known,
        near=None,
        frequency=1 if known else 0,
        idf=idf,
        word_pieces=1,
        capitalized=token[:1].isupper(),
        numeric=False,
    )


def test_term_coverage_weighs_rare_terms_and_names_the_rarest():
    terms = QuestionTerms(
        terms=(term("tower", 1.0), term("Eddystone", 4.0), term("designed", 1.0)),
        vocabulary_size=100,
        chunk_count=50,
    )
    share, rarest = term_coverage(terms, "The Eddystone tower stands on rocks.")
    assert share == pytest.approx(5.0 / 6.0)
    assert rarest is True
    share, rarest = term_coverage(terms, "The tower was designed by an engineer.")
    assert share == pytest.approx(2.0 / 6.0)
    assert rarest is False


def test_the_generic_question_bank_is_shipped_and_varied():
    bank = generic_questions()
    assert len(bank) >= 100
    assert len(set(bank)) == len(bank)
    assert all(q.endswith("?") for q in bank)


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("What is the refund window for new customers?", "duration"),
        ("What is the notice period for resigning?", "duration"),
        ("What is the deadline for expense claims?", "duration"),
        ("When was the tower lit?", "when"),
        ("How many days of annual leave do I get?", "number"),
        ("Who approves refunds above the limit?", "who"),
        ("What is the password manager?", ""),
        ("How often must the gateway code change?", "frequency"),
    ],
)
def test_the_sentence_choice_expects_a_duration_for_a_named_span_of_time(question, kind):
    assert expected_answer(question) == kind


def test_a_duration_is_a_number_with_a_unit_of_time():
    assert answer_matches("duration", "Cancel within 30 days of the first payment.")
    assert answer_matches("duration", "We answer within two working days.")
    assert answer_matches("duration", "The 30-day period runs from the invoice date.")
    assert not answer_matches("duration", "It is written for the Finance team.")
    assert not answer_matches("duration", "The tower was lit in 1882.")
    assert answer_matches("when", "The tower was lit in 1882.")  # other kinds as type_matches


def test_a_frequency_is_a_rate_not_any_number():
    assert answer_matches("frequency", "The code must change every month.")
    assert answer_matches("frequency", "Backups run twice a day and are checked weekly.")
    assert not answer_matches("frequency", "The code is printed in footnote 2 of the binder.")


def _chunk(chunk_id: int, text: str, similarity: float) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=chunk_id,
        document_id=1,
        document_title="Baggage",
        document_url="",
        chunk_index=chunk_id,
        page=None,
        section=None,
        text=text,
        excerpt=text,
        similarity=similarity,
        score=similarity,
    )


def test_the_sentences_compared_do_not_depend_on_the_order_of_the_chunks():
    """More sentences hold the question's words than are compared: which ones are (ties in
    words held go to the chunk closest to the question) is the same however retrieval ordered
    the chunks. A follow-up that asks for more searches the previous question again, preferring
    its documents; with ties going to the first chunk, its evidence was decided on other
    sentences than the question's own and could refuse what had just been answered."""
    chunks = [
        _chunk(1, "A bag costs 35 per flight. Each bag may weigh 23 kg.", 0.40),
        _chunk(2, "Golf bags count as one bag. A bag over 32 kg is refused.", 0.36),
        _chunk(3, "Report a delayed bag at the desk. We deliver the bag to you.", 0.44),
    ]
    question = "my bag did not arrive"

    def compared(order):
        return {s.text for s in compared_sentences(question, order, max_sentences=2)}

    assert compared(chunks) == compared(chunks[::-1]) == compared(chunks[1:] + chunks[:1])
    assert compared(chunks) == {
        "Report a delayed bag at the desk.",
        "We deliver the bag to you.",
    }
