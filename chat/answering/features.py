"""Signals of the evidence check beyond one cosine: what the best-matching sentence says
compared with what the question asks.

- **answer type**: a "when" question needs a date, a time or a duration in the sentence, a "how
  many / how much / how long" question a number or an amount, a "who" question a name (a
  capitalised word past the sentence's first) or a role;
- **rare-term coverage**: the IDF-weighted share of the question's terms (weights from the
  knowledge base's vocabulary) that the best sentence holds, and whether it holds the rarest one;
- **ranking agreement**: whether the best chunk is first in both the vector and the lexical
  ranking.

The best sentence is the one of `passage_similarities`' compared sentences closest to the
question (the chunk itself when no sentence was compared). How these combine is
chat/answering/evidence_signals.py; why these features:
`docs/decisions/0021-evidence-fitted-veto.md`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

import numpy as np

from chat.answering.answer_types import answer_type, type_matches
from chat.answering.extractive import (
    Sentence,
    candidate_sentences,
    lexical_scores,
    sentence_vectors,
)
from chat.answering.terms import terms
from knowledge.retrieval import RetrievedChunk
from knowledge.vocabulary import QuestionTerms

GENERIC_QUESTIONS_PATH = Path(__file__).resolve().parent / "data" / "generic_questions.txt"
COMPARED_SENTENCES = 4  # as evidence_signals.PASSAGE_MAX_SENTENCES


@dataclass(frozen=True)
class QuestionFeatures:
    best_similarity: float  # best retrieved chunk's cosine
    passage_similarity: float  # best cosine of a chunk or a compared sentence
    best_sentence: str  # the compared sentence closest to the question ("" when none)
    answer_type: str  # "when" | "number" | "who" | ""
    type_match: bool  # the best sentence holds what the answer type needs (True when untyped)
    coverage: float  # IDF-weighted share of the question's terms in the best sentence
    rarest_covered: bool  # the best sentence holds the question's rarest known term
    chunk_coverage: float  # the same share over the best chunk's text
    ranks_agree: bool  # the best chunk is first in the vector and the lexical ranking
    unknown_specific: int  # specific terms the knowledge base has never seen
    unknown_share: float  # IDF-weighted share of the question's terms the KB lacks

    def as_dict(self) -> dict:
        return asdict(self)


@cache
def generic_questions() -> tuple[str, ...]:
    """The shipped bank of generic questions (negatives for the per-KB calibration)."""
    lines = GENERIC_QUESTIONS_PATH.read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def term_coverage(question_terms: QuestionTerms, text: str) -> tuple[float, bool]:
    """(IDF-weighted share of the question's terms `text` holds, whether it holds the rarest
    known one). Terms are matched as the extractive answer matches them (`terms`)."""
    held = set(terms(text))
    total = covered = 0.0
    rarest: tuple[float, bool] | None = None
    for term in question_terms.terms:
        stems = terms(term.token)
        if not stems:
            continue
        found = all(stem in held for stem in stems)
        total += term.idf
        covered += term.idf if found else 0.0
        if term.known and (rarest is None or term.idf > rarest[0]):
            rarest = (term.idf, found)
    share = covered / total if total else 0.0
    return share, (rarest[1] if rarest else False)


def compared_sentences(
    question: str,
    chunks: Sequence[RetrievedChunk],
    max_sentences: int | None = COMPARED_SENTENCES,
) -> list[Sentence]:
    """The sentences compared with the question: candidates sharing a content word with it,
    the `max_sentences` holding most of its words, in reading order (None: every candidate)."""
    sentences = candidate_sentences(chunks)
    if max_sentences is None:
        return sentences
    wanted = set(terms(question))
    sentences = [s for s in sentences if wanted.intersection(terms(s.text))]
    if len(sentences) > max_sentences:
        scores = lexical_scores(question, [s.text for s in sentences])
        closeness = [_similarity_of(s.chunk) for s in sentences]
        top = sorted(range(len(sentences)), key=lambda i: (-scores[i], -closeness[i], i))[
            :max_sentences
        ]
        sentences = [sentences[i] for i in sorted(top)]
    return sentences


def _similarity_of(chunk: RetrievedChunk) -> float:
    return float(chunk.similarity) if chunk.similarity is not None else -1.0


def best_passage(
    *,
    question: str,
    question_vector: np.ndarray,
    chunks: Sequence[RetrievedChunk],
    max_sentences: int | None = COMPARED_SENTENCES,
) -> tuple[float, str, dict[int, float]]:
    """(passage similarity, the closest compared sentence, chunk id → its passage similarity):
    the sentences compared are `passage_similarities`' (the COMPARED_SENTENCES candidates
    holding most of the question's words), embedded through the shared sentence cache."""
    result = {c.chunk_id: float(c.similarity) for c in chunks if c.similarity is not None}
    best = max(result.values(), default=0.0)
    sentences = compared_sentences(question, chunks, max_sentences)
    best_text = ""
    if sentences:
        query = np.asarray(question_vector, dtype=np.float32)
        query = query / (np.linalg.norm(query) or 1.0)
        cosines = sentence_vectors([s.text for s in sentences]) @ query
        top_cosine = -1.0
        for sentence, cosine in zip(sentences, cosines, strict=True):
            chunk_id = sentence.chunk.chunk_id
            result[chunk_id] = max(result.get(chunk_id, -1.0), float(cosine))
            if float(cosine) > top_cosine:
                top_cosine, best_text = float(cosine), sentence.text
        best = max(best, top_cosine)
    return best, best_text, result


def features_from(
    question: str,
    chunks: Sequence[RetrievedChunk],
    qterms: QuestionTerms,
    passage: float,
    sentence: str,
) -> QuestionFeatures:
    """The features from what `best_passage` and the vocabulary gave (pure)."""
    top = chunks[0]
    kind = answer_type(question)
    text = sentence or top.text
    coverage, rarest = term_coverage(qterms, text)
    chunk_coverage, _ = term_coverage(qterms, top.text)
    similarities = [c.similarity for c in chunks if c.similarity is not None]
    return QuestionFeatures(
        best_similarity=float(max(similarities, default=0.0)),
        passage_similarity=float(passage),
        best_sentence=sentence,
        answer_type=kind,
        type_match=type_matches(kind, text),
        coverage=round(coverage, 4),
        rarest_covered=rarest,
        chunk_coverage=round(chunk_coverage, 4),
        ranks_agree=top.vector_rank == 1 and top.lexical_rank == 1,
        unknown_specific=len(qterms.unknown_specific),
        unknown_share=round(qterms.unknown_share, 4),
    )
