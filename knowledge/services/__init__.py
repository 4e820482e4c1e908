"""Writes of the knowledge app, one module per job:

- `ingest`: files in, searchable chunks out (and re-processing, re-chunking);
- `ingest_window`: the texts of several documents embedded together, then each written;
- `document_write`: a document's new chunks swapped in in one transaction, or its failure recorded;
- `lifecycle`: queueing for processing, enabling/disabling, purging expired documents;
- `reindex`: re-embedding chunks and sentences after the model changed;
- `vectors`: stored vectors looked up, embedded, written and pruned;
- `paths`: which files a list of paths stands for.

The public functions are re-exported here for callers outside the app (`knowledge.services`);
inside the app, import from the module itself. Reads are in knowledge/selectors.py.
"""

from __future__ import annotations

from knowledge.services.document_write import Action, IngestOutcome
from knowledge.services.ingest import (
    IngestError,
    document_ingest,
    document_process,
    documents_ingest,
    documents_reindex,
    title_from_name,
)
from knowledge.services.ingest_window import Progress
from knowledge.services.lifecycle import (
    document_processing_enqueue,
    documents_fail_interrupted,
    documents_purge_expired,
    documents_reprocess,
    documents_set_enabled,
)
from knowledge.services.paths import paths_expand
from knowledge.services.reindex import embeddings_rebuild_stale, sentence_vectors_rebuild_stale
from knowledge.services.vectors import (
    chunk_sentences,
    document_sentences_prune_on_commit,
    sentence_vectors_prune,
)

__all__ = [
    "Action",
    "IngestError",
    "IngestOutcome",
    "Progress",
    "chunk_sentences",
    "document_ingest",
    "document_process",
    "document_processing_enqueue",
    "document_sentences_prune_on_commit",
    "documents_fail_interrupted",
    "documents_ingest",
    "documents_purge_expired",
    "documents_reindex",
    "documents_reprocess",
    "documents_set_enabled",
    "embeddings_rebuild_stale",
    "paths_expand",
    "sentence_vectors_prune",
    "sentence_vectors_rebuild_stale",
    "title_from_name",
]
