"""Per-knowledge-base calibration of the evidence check: the knowledge base measures itself.

- **negatives**: the shipped bank of generic questions (chat/answering/data/
  generic_questions.txt), none about any organisation's documents, each searched like a user's
  question; the NEGATIVE_QUANTILE of their passage similarities is the knowledge base's *noise
  floor* — how close its best passage comes to questions it does not answer;
- **positives**: probe questions made from its own sentences (PROBES sentences spread over the
  chunks, each reduced to some of its content words); the POSITIVE_QUANTILE of their passage
  similarities is the *probe floor* — how close the passage that does answer comes.

The knowledge base measured is what all staff may read (`knowledge.access.reader_of_all_staff`:
the collections readable by all staff): the one threshold every asker is checked against is
never shaped by text only some may read (docs/decisions/0076-statistics-per-reader.md).

The automatic threshold is the noise floor, never above the probe floor (a knowledge base whose
own questions match weakly keeps answering them). The values are stored (`EvidenceCalibration`,
one row) with the fingerprint of the knowledge base they were measured on, recomputed by a
background task when it changes (ingestion, re-processing, enabling, disabling or deleting a
document), shown on the Chat settings page, and used by the evidence check when the admin
chooses it (chat/answering/evidence.py `evidence_threshold`). Why:
`docs/decisions/0027-evidence-calibration-per-knowledge-base.md`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np
from django.db import transaction

from chat.answering.extractive import sentence_vectors
from chat.answering.features import best_passage, compared_sentences, generic_questions
from chat.answering.terms import STOP_WORDS
from chat.models import EvidenceCalibration
from knowledge import embedding
from knowledge.access import Reader, reader_of_all_staff
from knowledge.retrieval import chunks_search
from knowledge.search_scope import searchable_chunks
from knowledge.sentences import answerable_sentences
from knowledge.vocabulary import knowledge_base_fingerprint, vocabulary_scope

logger = logging.getLogger(__name__)

NEGATIVE_QUANTILE = 0.95
POSITIVE_QUANTILE = 0.05
PROBES = 60  # probe questions made from the knowledge base's own sentences
PROBE_WORDS = 6  # content words a probe keeps
MIN_SAMPLES = 10  # fewer probes than this (a tiny knowledge base): no probe floor
# What the Chat settings page says about how the values are used.
CALIBRATION_USE = (
    'With "Use the automatic threshold" ticked, the evidence check compares questions with '
    "the automatic threshold instead of yours; manage.py evaluate DATASET --calibrate "
    "compares it with the threshold your labelled questions call for."
)


@dataclass(frozen=True)
class CalibrationValues:
    noise_floor: float  # NEGATIVE_QUANTILE of the generic questions' passage similarities
    probe_floor: float | None  # POSITIVE_QUANTILE of the probes' (None: too few probes)
    threshold: float  # the automatic threshold
    negatives: int
    positives: int


def fingerprint_key() -> str:
    """The fingerprint (knowledge/vocabulary.py) of what all staff may read (the calibration's
    scope), without the database name."""
    scope = vocabulary_scope(reader_of_all_staff())
    return ",".join(str(part) for part in knowledge_base_fingerprint(scope)[1:])


@cache
def _bank_vectors() -> np.ndarray:
    """The generic questions' vectors, embedded once per process."""
    return embedding.embed_texts(list(generic_questions()))


def passage_similarities_of(
    questions: Sequence[str], vectors: np.ndarray | None = None, *, reader: Reader
) -> list[float]:
    """The best passage similarity retrieval finds for each question (those that retrieve
    nothing left out). The compared sentences of all questions are embedded in one batch (the
    shared sentence cache), far cheaper than one call per question."""
    if vectors is None:
        vectors = embedding.embed_texts(list(questions))
    searches = [
        (question, chunks_search(query=question, reader=reader, top_k=5, query_vector=vector))
        for question, vector in zip(questions, vectors, strict=True)
    ]
    searches = [(question, search) for question, search in searches if search.chunks]
    texts = {s.text for q, search in searches for s in compared_sentences(q, search.chunks)}
    sentence_vectors(sorted(texts))
    return [
        best_passage(question=q, question_vector=search.query_vector, chunks=search.chunks)[0]
        for q, search in searches
    ]


def probe_questions(limit: int = PROBES, *, reader: Reader) -> list[str]:
    """Up to `limit` probes: chunks spread evenly over the knowledge base (in id order), from
    each its longest sentence, reduced to PROBE_WORDS of its content words taken every other
    word — a keyword question about something the sentence says, not the sentence itself."""
    ids = list(searchable_chunks(reader=reader).order_by("pk").values_list("pk", flat=True))
    if not ids:
        return []
    step = max(1, len(ids) // limit)
    chosen = ids[::step][:limit]
    probes = []
    for chunk in searchable_chunks(reader=reader).filter(pk__in=chosen).order_by("pk"):
        sentences = answerable_sentences(chunk.text, sheet=bool(chunk.sheet))
        if not sentences:
            continue
        longest = max(sentences, key=len)
        words = [w.strip(".,;:()[]\"'") for w in longest.split()]
        content = [w for w in words if w and w.lower() not in STOP_WORDS and len(w) > 2]
        probe = " ".join(content[::2][:PROBE_WORDS])
        if len(probe.split()) >= 3:
            probes.append(probe)
    return probes


def calibration_compute() -> CalibrationValues | None:
    """Measure what all staff may read (`reader_of_all_staff`: a restricted collection's text
    never moves the threshold everyone is checked against); None when that is empty. Embeds
    every generic question and probe: seconds, for a background task."""
    reader = reader_of_all_staff()
    negatives = passage_similarities_of(generic_questions(), _bank_vectors(), reader=reader)
    if not negatives:
        return None
    positives = passage_similarities_of(probe_questions(reader=reader), reader=reader)
    noise = float(np.quantile(negatives, NEGATIVE_QUANTILE))
    probe = None
    if len(positives) >= MIN_SAMPLES:
        probe = float(np.quantile(positives, POSITIVE_QUANTILE))
    threshold = noise if probe is None else min(noise, probe)
    return CalibrationValues(
        noise_floor=round(noise, 4),
        probe_floor=None if probe is None else round(probe, 4),
        threshold=round(threshold, 4),
        negatives=len(negatives),
        positives=len(positives),
    )


def calibration_refresh(*, force: bool = False) -> EvidenceCalibration | None:
    """Recompute and store the calibration when the knowledge base changed since it was
    measured (or `force`); the stored row, None for an empty knowledge base (any stored row is
    then removed)."""
    key = fingerprint_key()
    current = calibration_current()
    if current is not None and current.fingerprint == key and not force:
        return current
    values = calibration_compute()
    with transaction.atomic():
        if values is None:
            EvidenceCalibration.objects.filter(pk=1).delete()
            return None
        row, _ = EvidenceCalibration.objects.update_or_create(
            pk=1,
            defaults={
                "fingerprint": key,
                "noise_floor": values.noise_floor,
                "probe_floor": values.probe_floor,
                "threshold": values.threshold,
                "negatives": values.negatives,
                "positives": values.positives,
            },
        )
    logger.info("evidence calibration: %s", values)
    return row


def calibration_current() -> EvidenceCalibration | None:
    """The stored calibration, whether or not the knowledge base changed since."""
    return EvidenceCalibration.objects.filter(pk=1).first()


def calibration_is_current(calibration: EvidenceCalibration) -> bool:
    """Whether `calibration` was measured on the knowledge base as it is now."""
    return calibration.fingerprint == fingerprint_key()
