"""Parsed documents waiting for the model: their texts embedded together, then each document
written in its own transaction.

When many files are ingested, the texts of several documents wait in a window and go to
the model together: one call sorts them by length, so batches carry little padding and the
model runs at its own speed however small the documents are. Only the texts not already
embedded under the current model anywhere in the knowledge base (same text hash and same
section, as the heading path is part of what the model reads) are sent. Each document is
then written by knowledge/services/document_write.py.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.conf import settings

from knowledge.services.document_write import IngestJob, IngestOutcome, job_write
from knowledge.services.vectors import sentences_missing, texts_embed, vectors_known

logger = logging.getLogger(__name__)

Progress = Callable[[int], None]


def _embed_window() -> int:
    """Texts collected from several documents before the model is called."""
    return max(256, 4 * settings.EMBEDDING_BATCH_SIZE)


class IngestWindow:
    """Collects jobs until enough texts wait for the model, embeds them in one call, then
    writes each document in its own transaction. Outcomes keep the order of `add`."""

    def __init__(self, progress: Progress | None = None) -> None:
        self._results: list[IngestOutcome | None] = []
        self._jobs: list[tuple[int, IngestJob]] = []
        self._waiting = 0
        self._progress = progress

    def add(self, step: IngestOutcome | IngestJob) -> None:
        position = len(self._results)
        self._results.append(None)
        if isinstance(step, IngestOutcome):
            self._done(position, step)
            return
        self._jobs.append((position, step))
        self._waiting += len(step.missing) + len(step.sentences_missing)
        if self._waiting >= _embed_window():
            self.flush()

    def flush(self) -> None:
        jobs, self._jobs, self._waiting = self._jobs, [], 0
        if not jobs:
            return
        _jobs_embed([job for _, job in jobs])
        for position, job in jobs:
            try:
                outcome = job_write(job)
            except Exception as exc:  # one document must not stop the others; logged in full
                logger.exception("Writing %s failed", job.source)
                error = f"Unexpected error: {exc}"
                outcome = IngestOutcome(job.source, "failed", job.existing, 0, error)
            self._done(position, outcome)

    def outcomes(self) -> list[IngestOutcome]:
        self.flush()
        return [outcome for outcome in self._results if outcome is not None]

    def _done(self, position: int, outcome: IngestOutcome) -> None:
        self._results[position] = outcome
        if self._progress:
            self._progress(1)


def job_new(**fields) -> IngestJob:
    """A job whose texts already embedded under the current model (anywhere in the
    knowledge base) are looked up now; only the others will be sent to the model."""
    job = IngestJob(**fields)
    job.known = vectors_known([(draft.text_hash, draft.section) for draft in job.drafts])
    for draft in job.drafts:
        key = (draft.text_hash, draft.section)
        if key not in job.known:
            job.missing.setdefault(key, draft.embedding_input)
    job.sentences_missing = sentences_missing([(d.text, bool(d.sheet)) for d in job.drafts])
    return job


def _jobs_embed(jobs: list[IngestJob]) -> None:
    """Embed the missing texts of all jobs together (each distinct text once). If the model
    fails, each job is tried alone so one bad document cannot fail the others."""
    missing: dict[Any, str] = {}
    for job in jobs:
        missing.update(job.missing)
        missing.update({("sentence", key): text for key, text in job.sentences_missing.items()})
    try:
        vectors = texts_embed(missing)  # chunks and sentences in one call, batched by length
    except Exception as exc:  # the model failing is reported on the documents, not raised
        if len(jobs) > 1:
            for job in jobs:
                _jobs_embed([job])
            return
        logger.exception("Embedding %s failed", jobs[0].source)
        jobs[0].error = f"Could not compute embeddings: {exc}"
        return
    for job in jobs:
        job.known.update({key: vectors[key] for key in job.missing})
        job.missing = {}
        job.sentence_vectors = {key: vectors[("sentence", key)] for key in job.sentences_missing}
        job.sentences_missing = {}
