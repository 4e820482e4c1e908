"""The spelling correction of a question's terms does bounded work, whatever the question
(docs/decisions/0100-spelling-correction-bounded.md): a long unbroken token (a run of CJK
characters is one word to PostgreSQL's parser) or a flood of unknown words costs a few
milliseconds, not seconds."""

from __future__ import annotations

import time

import pytest

from knowledge import vocabulary
from knowledge.access import OPERATOR
from knowledge.vocabulary import (
    QUESTION_MAX_TERMS,
    TYPO_MAX_LENGTH,
    TYPO_MAX_LOOKUPS,
    question_terms,
    vocabulary_get,
)
from tests.support.knowledge_base import document_create

pytestmark = pytest.mark.django_db

STEAM = [
    "The steam engine used the pressure of steam to push a piston.",
    "Watt improved the steam engine with a separate condenser in 1765.",
]
CJK_RUN = "".join(chr(0x4E00 + i) for i in range(3000))  # 3,000 distinct characters, one word


@pytest.fixture(autouse=True)
def steam_kb():
    vocabulary.vocabulary_forget()
    document_create(title="Steam", texts=STEAM)
    yield
    vocabulary.vocabulary_forget()


@pytest.fixture
def candidates(monkeypatch) -> list[int]:
    """The number of edit candidates generated, counted as `nearest` consumes them."""
    counted = [0]
    original = vocabulary.edits1

    def counting(word):
        for edit in original(word):
            counted[0] += 1
            yield edit

    monkeypatch.setattr(vocabulary, "edits1", counting)
    return counted


def test_a_long_unbroken_token_is_not_spell_checked(candidates):
    known = vocabulary_get(reader=OPERATOR)
    started = time.perf_counter()
    terms = question_terms(f"What is {CJK_RUN}?", reader=OPERATOR, vocabulary=known)
    elapsed = time.perf_counter() - started

    (run,) = [term for term in terms.terms if len(term.lexeme) > TYPO_MAX_LENGTH]
    assert not run.known and run.near is None
    assert candidates[0] == 0
    assert elapsed < 1.0  # generous: the old code took seconds to minutes here


def test_a_word_at_the_length_bound_is_still_corrected(candidates):
    word = "condenser" + "x" * (TYPO_MAX_LENGTH - len("condenser"))
    known = vocabulary.Vocabulary(
        fingerprint=("test",), chunk_count=2, document_frequency={word: 1, "piston": 1}
    )
    assert known.nearest(word[:-1]) == word
    assert known.nearest("pistn") == "piston"
    assert known.nearest(word + "y") is None  # one beyond the bound: not looked up
    assert candidates[0] > 0


def test_only_the_first_unknown_words_are_spell_checked(candidates):
    typos = " ".join(f"pistn{chr(0x61 + i)}q" for i in range(TYPO_MAX_LOOKUPS + 5))
    terms = question_terms(f"Did the pistn move {typos}?", reader=OPERATOR)

    assert terms.terms[0].near == "piston"  # the first unknown word is still corrected
    looked_up = {term.lexeme for term in terms.terms if not term.known}
    assert len(looked_up) > TYPO_MAX_LOOKUPS
    per_word = max(len(list(vocabulary.edits1("pistnzq"))), 1)
    assert candidates[0] <= TYPO_MAX_LOOKUPS * 2 * per_word


def test_a_question_is_measured_on_its_first_terms_only():
    words = " ".join(f"w{i}x{i}" for i in range(QUESTION_MAX_TERMS * 3))
    terms = question_terms(f"Steam {words}", reader=OPERATOR)

    assert len(terms.terms) == QUESTION_MAX_TERMS
    assert terms.terms[0].lexeme == "steam" and terms.terms[0].known


def test_a_hostile_question_of_the_longest_size_costs_milliseconds():
    known = vocabulary_get(reader=OPERATOR)
    hostile = [
        CJK_RUN,
        " ".join(
            "".join(chr(0x4E00 + 23 * j + i) for i in range(TYPO_MAX_LENGTH)) for j in range(150)
        ),
        ". ".join(f"Abcd{i}" for i in range(600)),
    ]
    for question in hostile:
        question = question[:4000]
        question_terms(question, reader=OPERATOR, vocabulary=known)  # the parse is cached
        started = time.perf_counter()
        question_terms(question, reader=OPERATOR, vocabulary=known)
        assert time.perf_counter() - started < 0.25  # generous; see the decision record
