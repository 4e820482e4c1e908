"""The evidence check's signals and decision: the admin threshold, a close passage, and names
the knowledge base has never heard of."""

from __future__ import annotations

import numpy as np
import pytest

from chat.answering import extractive
from chat.answering.evidence_signals import (
    PASSAGE_MARGIN,
    PASSAGE_MAX_SENTENCES,
    UNKNOWN_TERM_MARGIN,
    WEAK_SUPPORT_MARGIN,
    evidence_assess,
    evidence_sufficient,
    passage_similarities,
)
from knowledge import embedding, vocabulary
from knowledge.access import OPERATOR
from knowledge.retrieval import chunks_search
from tests.support.knowledge_base import document_create

T = 0.35


# --- The decision (pure) -------------------------------------------------------------------------
def test_below_the_admin_threshold_is_always_a_refusal():
    assert evidence_sufficient(best_similarity=0.34, threshold=T, passage_similarity=0.9) == (
        False,
        "below-threshold",
    )
    assert evidence_sufficient(best_similarity=None, threshold=T, passage_similarity=None) == (
        False,
        "below-threshold",
    )


def test_a_passage_close_enough_is_needed_on_top_of_the_threshold():
    floor = T + PASSAGE_MARGIN
    assert evidence_sufficient(best_similarity=0.36, threshold=T, passage_similarity=floor - 0.01)[
        1
    ] == ("no-close-passage")
    assert evidence_sufficient(best_similarity=0.36, threshold=T, passage_similarity=floor) == (
        True,
        "sufficient",
    )
    # The passage similarity is never below the best chunk's own similarity.
    assert evidence_sufficient(best_similarity=0.6, threshold=T, passage_similarity=None)[0]


def test_unknown_names_need_a_strong_passage():
    strong = T + UNKNOWN_TERM_MARGIN
    decide = evidence_sufficient
    assert decide(
        best_similarity=0.4, threshold=T, passage_similarity=0.5, unknown_specific_terms=["Fresno"]
    ) == (False, "unknown-terms")
    assert decide(
        best_similarity=0.4, threshold=T, passage_similarity=0.5, unknown_specific_terms=()
    ) == (True, "sufficient")
    assert decide(
        best_similarity=0.4,
        threshold=T,
        passage_similarity=strong,
        unknown_specific_terms=["Fresno"],
    ) == (True, "sufficient")


def test_the_threshold_is_compared_at_the_resolution_pgvector_returns():
    # pgvector computes in float32: a similarity meant to be 0.35 comes back as 0.3499999.
    assert evidence_sufficient(best_similarity=0.3499999, threshold=T, passage_similarity=0.6)[0]


def test_the_threshold_can_apply_to_the_best_passage_instead_of_the_best_chunk():
    kwargs = {"best_similarity": 0.30, "threshold": T, "passage_similarity": 0.5}
    assert evidence_sufficient(**kwargs) == (False, "below-threshold")
    assert evidence_sufficient(**kwargs, threshold_on="passage") == (True, "sufficient")
    assert evidence_sufficient(
        best_similarity=0.30, threshold=T, passage_similarity=0.34, threshold_on="passage"
    ) == (False, "below-threshold")


@pytest.mark.parametrize("threshold", [0.25, 0.35, 0.5])
def test_the_margins_move_with_the_admin_threshold(threshold):
    just_below = threshold + PASSAGE_MARGIN - 0.005
    just_above = threshold + PASSAGE_MARGIN + 0.005
    assert not evidence_sufficient(
        best_similarity=threshold, threshold=threshold, passage_similarity=just_below
    )[0]
    assert evidence_sufficient(
        best_similarity=threshold, threshold=threshold, passage_similarity=just_above
    )[0]


# --- Against a real knowledge base ---------------------------------------------------------------
SKY = [
    "BSkyB charged an additional subscription fee for its Sky+ HD service, which records "
    "high-definition programmes. The HD channels launched in May 2006. "
    "Subscribers also pay for a multiroom service that lets a second box share the account.",
    "Setanta Sports was awarded two of the six Premier League packages in 2006. "
    "Sky kept the other four packages and paid 1.3 billion pounds for them.",
]
STEAM = [
    "James Watt improved the Newcomen steam engine by adding a separate condenser in 1765. "
    "The separate condenser saved a great deal of fuel, because the cylinder no longer had to "
    "be cooled and heated again on every stroke of the piston.",
]


@pytest.fixture
def knowledge_base(db):
    vocabulary.vocabulary_forget()
    document_create(title="Sky (United Kingdom)", texts=SKY)
    document_create(title="Steam engine", texts=STEAM)
    yield
    vocabulary.vocabulary_forget()


def assess(question: str, threshold: float = T, **kwargs):
    vector, _ = embedding.embed_query(question)
    result = chunks_search(reader=OPERATOR, query=question, top_k=5, query_vector=vector)
    return evidence_assess(
        reader=OPERATOR,
        question=question,
        question_vector=vector,
        chunks=result.chunks,
        threshold=threshold,
        **kwargs,
    )


@pytest.mark.django_db
def test_a_sentence_matches_the_question_better_than_its_whole_chunk(knowledge_base):
    question = "Who did Watt add a separate condenser to?"
    vector, _ = embedding.embed_query(question)
    chunks = chunks_search(reader=OPERATOR, query=question, top_k=5, query_vector=vector).chunks

    passages = passage_similarities(question=question, question_vector=vector, chunks=chunks)

    steam = next(c for c in chunks if c.document_title == "Steam engine")
    sentence = STEAM[0].split(". ")[0] + "."
    sentence_vector = embedding.embed_texts([sentence])[0]
    assert passages[steam.chunk_id] == pytest.approx(float(sentence_vector @ vector), abs=1e-5)
    assert passages[steam.chunk_id] > steam.similarity
    assert set(passages) == {c.chunk_id for c in chunks}
    assert all(passages[c.chunk_id] >= c.similarity - 1e-6 for c in chunks)


@pytest.mark.django_db
def test_only_sentences_sharing_a_word_with_the_question_are_embedded(knowledge_base, monkeypatch):
    question = "Who did Watt add a separate condenser to?"
    vector, _ = embedding.embed_query(question)
    chunks = chunks_search(reader=OPERATOR, query=question, top_k=5, query_vector=vector).chunks
    embedded: list[str] = []
    real = embedding.embed_texts
    monkeypatch.setattr(
        embedding, "embed_texts", lambda texts, **kw: embedded.extend(texts) or real(texts, **kw)
    )
    extractive._vector_cache.clear()

    passage_similarities(question=question, question_vector=vector, chunks=chunks)
    filtered = list(embedded)
    extractive._vector_cache.clear()
    embedded.clear()
    passage_similarities(
        question=question, question_vector=vector, chunks=chunks, max_sentences=None
    )

    assert filtered and all("Watt" in text or "condenser" in text for text in filtered)
    assert "Setanta Sports was awarded two of the six Premier League packages in 2006." in embedded
    assert len(embedded) > len(filtered)


@pytest.mark.django_db
def test_at_most_the_sentences_holding_most_question_words_are_embedded(db, monkeypatch):
    vocabulary.vocabulary_forget()
    document_create(
        title="Condensers",
        texts=[
            "A condenser cools steam. A condenser was added by Watt. "
            "Watt added a separate condenser to the Newcomen engine. A condenser is a vessel."
        ],
    )
    question = "Who added a separate condenser to the Newcomen engine?"
    vector, _ = embedding.embed_query(question)
    chunks = chunks_search(reader=OPERATOR, query=question, top_k=5, query_vector=vector).chunks
    embedded: list[str] = []
    real = embedding.embed_texts
    monkeypatch.setattr(
        embedding, "embed_texts", lambda texts, **kw: embedded.extend(texts) or real(texts, **kw)
    )
    extractive._vector_cache.clear()

    passages = passage_similarities(
        question=question, question_vector=vector, chunks=chunks, max_sentences=1
    )

    assert embedded == ["Watt added a separate condenser to the Newcomen engine."]
    sentence_cosine = float(real(embedded)[0] @ vector)
    assert passages[chunks[0].chunk_id] == pytest.approx(
        max(sentence_cosine, chunks[0].similarity), abs=1e-5
    )


@pytest.mark.django_db
def test_a_question_the_documents_answer_is_accepted(knowledge_base):
    decision = assess("What did Watt add to the Newcomen steam engine?")

    assert decision.sufficient and decision.reason == "sufficient"


@pytest.mark.django_db
def test_a_misspelt_question_the_documents_answer_is_accepted(knowledge_base):
    decision = assess("What additional srevice did BSkyB chare a subscription fee for?")

    assert decision.sufficient, decision
    assert "srevice" not in decision.signals.unknown_specific_terms


@pytest.mark.django_db
def test_a_question_about_a_place_the_documents_never_mention_is_refused(knowledge_base):
    question = "Which company provides the train service in Fresno?"
    vector, _ = embedding.embed_query(question)
    chunks = chunks_search(reader=OPERATOR, query=question, top_k=5, query_vector=vector).chunks
    best = max(c.similarity for c in chunks)

    # A threshold the best chunk clears: the cosine alone would answer.
    decision = evidence_assess(
        reader=OPERATOR,
        question=question,
        question_vector=vector,
        chunks=chunks,
        threshold=best - 0.01,
    )

    assert not decision.sufficient
    assert decision.reason in {"unknown-terms", "no-close-passage"}
    assert decision.signals.passage_similarity is not None


@pytest.mark.django_db
def test_unknown_names_refuse_where_the_similarity_alone_would_answer(knowledge_base):
    """The same similarity with and without an unknown name: only the name makes it refuse."""
    question = "How much did Fresno pay for the Premier League packages?"
    vector, _ = embedding.embed_query(question)
    chunks = chunks_search(reader=OPERATOR, query=question, top_k=5, query_vector=vector).chunks
    passage = max(
        passage_similarities(question=question, question_vector=vector, chunks=chunks).values()
    )
    # A threshold that puts this passage between the two margins.
    threshold = passage - (PASSAGE_MARGIN + UNKNOWN_TERM_MARGIN) / 2
    known_only = vocabulary.question_terms(
        "How much was paid for the Premier League packages?", reader=OPERATOR
    )

    with_name = evidence_assess(
        reader=OPERATOR,
        question=question,
        question_vector=vector,
        chunks=chunks,
        threshold=threshold,
    )
    without_name = evidence_assess(
        reader=OPERATOR,
        question=question,
        question_vector=vector,
        chunks=chunks,
        threshold=threshold,
        terms=known_only,
    )

    assert with_name.reason == "unknown-terms"
    assert with_name.signals.unknown_specific_terms == ("Fresno",)
    # Answered: the passage stands between the margins, short of the weak-support band's
    # margin, so with the weak-evidence notice (docs/decisions/0034-weak-evidence-notice-band.md).
    assert (PASSAGE_MARGIN + UNKNOWN_TERM_MARGIN) / 2 < WEAK_SUPPORT_MARGIN
    assert (without_name.sufficient, without_name.reason) == (True, "weak-support")


@pytest.mark.django_db
def test_a_chunk_below_the_threshold_is_decided_without_embedding_sentences(
    knowledge_base, monkeypatch
):
    """A clear match is not settled by the chunk alone, since the fitted veto reads the best
    sentence (docs/decisions/0021-evidence-fitted-veto.md); a chunk below the threshold still
    settles at once."""
    question = "What did Watt add to the Newcomen steam engine?"
    vector, _ = embedding.embed_query(question)
    chunks = chunks_search(reader=OPERATOR, query=question, top_k=5, query_vector=vector).chunks
    embedded: list[str] = []
    real = embedding.embed_texts
    monkeypatch.setattr(
        embedding, "embed_texts", lambda texts, **kw: embedded.extend(texts) or real(texts, **kw)
    )
    extractive._vector_cache.clear()

    below = evidence_assess(
        reader=OPERATOR, question=question, question_vector=vector, chunks=chunks, threshold=0.99
    )
    assert below.reason == "below-threshold" and embedded == []

    clear = evidence_assess(
        reader=OPERATOR, question=question, question_vector=vector, chunks=chunks, threshold=0.05
    )
    assert clear.sufficient and clear.signals.features is not None
    assert 0 < len(embedded) <= PASSAGE_MAX_SENTENCES


@pytest.mark.django_db
def test_nothing_retrieved_is_a_refusal(knowledge_base):
    decision = evidence_assess(
        reader=OPERATOR,
        question="Anything?",
        question_vector=np.ones(384, dtype=np.float32),
        chunks=[],
        threshold=T,
    )

    assert decision == decision.__class__(False, "below-threshold", decision.signals, {})
