"""The evidence check's decision: do the documents hold an answer to this question, or refuse?

The rule (all similarities are cosines of the embedding model, `threshold` is the admin's
evidence threshold, default 0.35), as `evidence_sufficient` applies it, each failing step
naming its `Reason`:

1. **Threshold** — the best similarity below `threshold` → refuse ("below-threshold").
   `threshold_on` says what the threshold is compared with: the best chunk ("chunk",
   `docs/product.md §4` read literally) or the best passage ("passage"); the chat uses
   `THRESHOLD_ON`.
2. **A close passage** — the *passage similarity* is the best cosine between the question and
   any retrieved chunk or any compared sentence of one (`passage_similarities`). Below
   `threshold + PASSAGE_MARGIN` → refuse ("no-close-passage").
3. **Unknown names** — when the question names something the knowledge base's vocabulary does
   not hold at all (a *specific* unknown term: capitalised, or not a word the tokenizer knows
   whole, typos of known words excused; knowledge/vocabulary.py), the passage similarity must
   reach `threshold + UNKNOWN_TERM_MARGIN` → else refuse ("unknown-terms").
4. **The fitted veto** — a question the first three steps let through is refused
   ("weak-evidence") when `weak_evidence_score` over the features of
   chat/answering/features.py gives log-odds below 0.
5. **The weak-support band** — a question answered with log-odds below WEAK_SUPPORT_SCORE, or
   with a passage similarity below `threshold + WEAK_SUPPORT_MARGIN`, is answered with the
   weak-evidence notice ("weak-support", `docs/product.md §4`): the evidence cleared the check,
   narrowly. Like the veto, decided only on the full signals (`features` measured).

Both margins, the veto and the band move with the admin's threshold (or the knowledge base's
automatic one, chat/calibration.py): below it, always a refusal.
`evidence_assess` collects the signals lazily (no sentence is
compared when the threshold applies to the best chunk and it is below; the vocabulary is read
only when steps 1-2 would answer); `evidence_signals_all` collects all of them for replaying the
decision; `evidence_outcome` turns a decision into the chunks to answer from or the refusal.

Why this rule, its constants, what it measured and the alternatives not taken:
`docs/decisions/0020-evidence-rule-passage-and-margins.md` (steps 1-3, cost per question) and
`docs/decisions/0021-evidence-fitted-veto.md` (step 4),
`docs/decisions/0034-weak-evidence-notice-band.md` (step 5).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from chat.answering.evidence import NO_EVIDENCE_REFUSAL, Refusal, meets_threshold
from chat.answering.features import (
    COMPARED_SENTENCES,
    QuestionFeatures,
    best_passage,
    features_from,
)
from knowledge.access import Reader
from knowledge.retrieval import RetrievedChunk
from knowledge.vocabulary import QuestionTerms, question_terms

PASSAGE_MARGIN = 0.09
UNKNOWN_TERM_MARGIN = 0.20
PASSAGE_MAX_SENTENCES = COMPARED_SENTENCES  # sentences compared per question

# The fitted veto (step 4 of the rule): log-odds that the documents answer the question, from
# the features of chat/answering/features.py; below 0 → refuse ("weak-evidence"). Similarities
# enter as their distance above the admin's threshold. How it was fitted:
# docs/decisions/0021-evidence-fitted-veto.md.
WEAK_EVIDENCE_COEFFICIENTS = {
    "passage_above_threshold": 7.07,
    "chunk_above_threshold": 5.658,
    "unknown_specific": 0.667,  # the rule already asked such questions for a strong passage
    "unknown_share": -1.558,
    "coverage": 1.168,
    "rarest_covered": 0.39,
    "chunk_coverage": 2.364,
    "type_mismatch": -0.348,
    "ranks_agree": 0.217,
}
WEAK_EVIDENCE_INTERCEPT = -1.301  # the fitted intercept (-1.225) less the chosen cut-off (0.075)

# The weak-support band (step 5 of the rule): an answer whose fitted log-odds clear the veto (0)
# but stay below WEAK_SUPPORT_SCORE, or whose best passage is below threshold +
# WEAK_SUPPORT_MARGIN, is given with the weak-evidence notice ("weak-support"). Chosen on folds:
# docs/decisions/0034-weak-evidence-notice-band.md.
WEAK_SUPPORT_SCORE = 1.0
WEAK_SUPPORT_MARGIN = 0.17

Reason = Literal[
    "sufficient",
    "weak-support",
    "below-threshold",
    "no-close-passage",
    "unknown-terms",
    "weak-evidence",
    "unknown-in-context",
]
# The reasons of an answer: "weak-support" answers with the weak-evidence notice.
WEAK_SUPPORT: Reason = "weak-support"
# A follow-up searched in context whose own words name something the documents never mention
# (chat/answering/followups.py `unknown_own_terms`): answered with the weak-evidence notice too.
UNKNOWN_IN_CONTEXT: Reason = "unknown-in-context"
# The reasons answered with the weak-evidence notice.
WEAK_REASONS: frozenset[str] = frozenset({WEAK_SUPPORT, UNKNOWN_IN_CONTEXT})
ThresholdOn = Literal["chunk", "passage"]
# What the chat compares the admin's threshold with: the best passage
# (docs/decisions/0020-evidence-rule-passage-and-margins.md).
THRESHOLD_ON: ThresholdOn = "passage"


@dataclass(frozen=True)
class EvidenceSignals:
    best_similarity: float | None  # best cosine of a retrieved chunk
    passage_similarity: float | None = None  # best cosine of a retrieved chunk or sentence
    unknown_specific_terms: tuple[str, ...] = ()  # as written in the question
    unknown_share: float | None = None  # IDF-weighted share of terms the KB lacks (reported)
    features: QuestionFeatures | None = None  # for the fitted check (None: not measured)


@dataclass(frozen=True)
class EvidenceDecision:
    sufficient: bool
    reason: Reason
    signals: EvidenceSignals
    # chunk id → passage similarity, for the chunks whose sentences were compared.
    passage_by_chunk: dict[int, float] = field(default_factory=dict, repr=False)


def passage_similarities(
    *,
    question: str,
    question_vector: np.ndarray,
    chunks: Sequence[RetrievedChunk],
    max_sentences: int | None = PASSAGE_MAX_SENTENCES,
) -> dict[int, float]:
    """chunk id → the best cosine between the question and the chunk or one of its sentences.

    Sentences are the extractive answer's candidates (same splitting, same vector cache, so the
    answer that follows does not embed them again). Only sentences sharing a content word with
    the question are compared, and at most `max_sentences` of them (PASSAGE_MAX_SENTENCES by
    default; None compares them all), those holding most of the question's words (the
    extractive answer's lexical score). A chunk without a compared sentence keeps its own
    similarity (features.best_passage). Why at most 4:
    docs/decisions/0020-evidence-rule-passage-and-margins.md.
    """
    return best_passage(
        question=question,
        question_vector=question_vector,
        chunks=chunks,
        max_sentences=max_sentences,
    )[2]


def weak_evidence_score(features: QuestionFeatures, threshold: float) -> float:
    """The fitted check's log-odds (below 0: refuse)."""
    values = {
        "passage_above_threshold": features.passage_similarity - threshold,
        "chunk_above_threshold": features.best_similarity - threshold,
        "unknown_specific": float(features.unknown_specific > 0),
        "unknown_share": features.unknown_share,
        "coverage": features.coverage,
        "rarest_covered": float(features.rarest_covered),
        "chunk_coverage": features.chunk_coverage,
        "type_mismatch": float(not features.type_match),
        "ranks_agree": float(features.ranks_agree),
    }
    return WEAK_EVIDENCE_INTERCEPT + sum(
        WEAK_EVIDENCE_COEFFICIENTS[name] * value for name, value in values.items()
    )


def evidence_sufficient(
    *,
    best_similarity: float | None,
    threshold: float,
    passage_similarity: float | None,
    unknown_specific_terms: Sequence[str] = (),
    threshold_on: ThresholdOn = "chunk",
    features: QuestionFeatures | None = None,
    band: tuple[float, float] | None = None,
) -> tuple[bool, Reason]:
    """The decision (pure): (True, "sufficient"), (True, "weak-support": answer with the
    weak-evidence notice) or (False, the reason to refuse).

    `band`: the weak-support band's (log-odds edge, passage margin), by default
    (WEAK_SUPPORT_SCORE, WEAK_SUPPORT_MARGIN); other values replay the decision at other edges
    (`manage.py evaluate --calibrate`).

    `best_similarity` is the best retrieved chunk's cosine, `passage_similarity` the best of a
    chunk or a sentence of one (never lower than `best_similarity`; None when no sentence was
    compared). `threshold_on` says what the admin's threshold is compared with: the best chunk
    (`docs/product.md §4` read literally) or the best passage. The rule: the module docstring.
    """
    passage = best_similarity
    if passage_similarity is not None:
        passage = passage_similarity if passage is None else max(passage, passage_similarity)
    on_threshold = best_similarity if threshold_on == "chunk" else passage
    if not meets_threshold(on_threshold, threshold):
        return False, "below-threshold"
    if not meets_threshold(passage, threshold + PASSAGE_MARGIN):
        return False, "no-close-passage"
    if unknown_specific_terms and not meets_threshold(passage, threshold + UNKNOWN_TERM_MARGIN):
        return False, "unknown-terms"
    if features is not None:
        score = weak_evidence_score(features, threshold)
        if score < 0:
            return False, "weak-evidence"
        band_score, band_margin = band or (WEAK_SUPPORT_SCORE, WEAK_SUPPORT_MARGIN)
        if score < band_score or not meets_threshold(passage, threshold + band_margin):
            return True, WEAK_SUPPORT
    return True, "sufficient"


def signals_sufficient(
    signals: EvidenceSignals,
    *,
    threshold: float,
    threshold_on: ThresholdOn = "chunk",
    band: tuple[float, float] | None = None,
) -> tuple[bool, Reason]:
    """`evidence_sufficient` on collected signals."""
    return evidence_sufficient(
        band=band,
        best_similarity=signals.best_similarity,
        threshold=threshold,
        passage_similarity=signals.passage_similarity,
        unknown_specific_terms=signals.unknown_specific_terms,
        threshold_on=threshold_on,
        features=signals.features,
    )


def _decision(
    signals: EvidenceSignals,
    passages: dict[int, float],
    *,
    threshold: float,
    threshold_on: ThresholdOn,
) -> EvidenceDecision:
    ok, reason = signals_sufficient(signals, threshold=threshold, threshold_on=threshold_on)
    return EvidenceDecision(ok, reason, signals, passages)


def _below_on_chunk(best: float | None, threshold: float, threshold_on: ThresholdOn) -> bool:
    """Settled without a sentence: the best chunk is below the threshold it is compared with."""
    return threshold_on == "chunk" and not meets_threshold(best, threshold)


def _best_of(chunks: Sequence[RetrievedChunk]) -> float | None:
    similarities = [c.similarity for c in chunks if c.similarity is not None]
    return max(similarities) if similarities else None


def _signals(
    question: str,
    chunks: Sequence[RetrievedChunk],
    passage: tuple[float, str, dict[int, float]],
    terms: QuestionTerms | None,
) -> EvidenceSignals:
    best = _best_of(chunks)
    similarity, sentence, passages = passage
    if terms is None:
        return EvidenceSignals(
            best_similarity=best, passage_similarity=max(passages.values(), default=None)
        )
    return EvidenceSignals(
        best_similarity=best,
        passage_similarity=max(passages.values(), default=None),
        unknown_specific_terms=tuple(term.token for term in terms.unknown_specific),
        unknown_share=round(terms.unknown_share, 4),
        features=features_from(question, chunks, terms, similarity, sentence),
    )


def evidence_signals_all(
    *,
    question: str,
    question_vector: np.ndarray,
    chunks: Sequence[RetrievedChunk],
    reader: Reader,
) -> EvidenceSignals:
    """Every signal the decision may use, whether or not the threshold would need it (the
    assessments below collect them only as needed): for replaying the decision at other
    thresholds (`manage.py evaluate --calibrate`). Reads the database and embeds sentences."""
    passage = best_passage(question=question, question_vector=question_vector, chunks=chunks)
    return _signals(question, chunks, passage, question_terms(question, reader=reader))


def _needs_terms(signals: EvidenceSignals, threshold: float, threshold_on: ThresholdOn) -> bool:
    """Whether the rule, without the question's terms, would answer: only then do the terms
    (unknown names, the fitted check's features) matter."""
    ok, _ = signals_sufficient(signals, threshold=threshold, threshold_on=threshold_on)
    return ok


def evidence_assess(
    *,
    question: str,
    question_vector: np.ndarray,
    chunks: Sequence[RetrievedChunk],
    threshold: float,
    reader: Reader,
    threshold_on: ThresholdOn = "chunk",
    terms: QuestionTerms | None = None,
) -> EvidenceDecision:
    """Collect the signals the decision needs, lazily, and decide.

    Reads the database (the vocabulary's fingerprint, the question's parse) and may embed up to
    PASSAGE_MAX_SENTENCES sentences (the pipeline runs it with the retrieval it checks, on the
    socket's or the request's own thread: chat/answering/search.py). The question's terms are
    measured against the vocabulary of what `reader` may search; `terms`, when given, replaces
    that lookup.
    """
    rule = {"threshold": threshold, "threshold_on": threshold_on}
    best = _best_of(chunks)
    if not chunks or _below_on_chunk(best, threshold, threshold_on):
        return _decision(EvidenceSignals(best_similarity=best), {}, **rule)
    passage = best_passage(question=question, question_vector=question_vector, chunks=chunks)
    signals = _signals(question, chunks, passage, None)
    if not _needs_terms(signals, **rule):
        return _decision(signals, passage[2], **rule)
    terms = terms or question_terms(question, reader=reader)
    return _decision(_signals(question, chunks, passage, terms), passage[2], **rule)


def evidence_outcome(
    chunks: Sequence[RetrievedChunk], decision: EvidenceDecision, threshold: float
) -> tuple[list[RetrievedChunk], Refusal | None]:
    """(the chunks to answer from, None), or ([], the no-evidence refusal).

    A chunk qualifies when it, or one of its compared sentences, meets the admin's threshold;
    retrieval order is kept. A sufficient decision always leaves at least one: its best passage
    is above the threshold.
    """
    if not decision.sufficient:
        return [], NO_EVIDENCE_REFUSAL
    passage = decision.passage_by_chunk
    qualifying = [
        chunk
        for chunk in chunks
        if meets_threshold(passage.get(chunk.chunk_id, chunk.similarity), threshold)
    ]
    return (qualifying, None) if qualifying else ([], NO_EVIDENCE_REFUSAL)
