"""Build searchable documents directly (no parsing, no chunking) for retrieval tests.

Chunks get real embeddings from the real model unless the test hands in its own vectors
(useful to control exactly which chunk is nearest). Rows are created the way ingestion
stores them: one Chunk per text, one Embedding per chunk tagged with the configured model.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence

import numpy as np

from knowledge import embedding
from knowledge.models import Chunk, Document, Embedding


def unit(vector: Sequence[float] | np.ndarray) -> np.ndarray:
    """`vector` scaled to length 1 (float32), as the model's embeddings are."""
    array = np.asarray(vector, dtype=np.float32)
    return array / np.linalg.norm(array)


def basis_vector(axis: int, dimensions: int = embedding.DIMENSIONS) -> np.ndarray:
    vector = np.zeros(dimensions, dtype=np.float32)
    vector[axis] = 1.0
    return vector


def document_with_chunks(
    *,
    title: str,
    texts: Sequence[str],
    enabled: bool = True,
    status: str = Document.Status.READY,
    sections: Sequence[str | None] | None = None,
    pages: Sequence[int | None] | None = None,
    vectors: np.ndarray | Sequence[np.ndarray] | None = None,
    model: str | None = None,
    source: str | None = None,
    metadata: dict | None = None,
) -> Document:
    """A Document whose chunks are `texts`, embedded (or given `vectors`) and searchable.

    `model` overrides the embedding model name (e.g. to make the embeddings stale). Raises
    ValueError when `vectors` is given with a different length than `texts`.
    """
    document = Document.objects.create(
        title=title,
        source=source or f"test:{uuid.uuid4().hex}/{title}",
        media_type="text/plain",
        content_hash=hashlib.sha256("\n".join(texts).encode()).hexdigest(),
        status=status,
        enabled=enabled,
        metadata=metadata or {},
    )
    if vectors is None:
        vectors = embedding.embed_texts(list(texts))
    if len(vectors) != len(texts):
        raise ValueError("one vector per text is needed")
    offset = 0
    chunks = []
    for index, text in enumerate(texts):
        chunks.append(
            Chunk(
                document=document,
                index=index,
                text=text,
                page=pages[index] if pages else None,
                section=sections[index] if sections else None,
                char_start=offset,
                char_end=offset + len(text),
                token_count=len(text.split()),
                text_hash=hashlib.sha256(text.encode()).hexdigest(),
            )
        )
        offset += len(text) + 1
    chunks = Chunk.objects.bulk_create(chunks)
    Embedding.objects.bulk_create(
        Embedding(
            chunk=chunk,
            vector=np.asarray(vector, dtype=np.float32),
            model=model or embedding.model_version(),
        )
        for chunk, vector in zip(chunks, vectors, strict=True)
    )
    return document
