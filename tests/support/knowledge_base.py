"""Controlled knowledge bases: documents, chunks and embeddings written directly, as ingestion
stores them (no parsing, no chunking), and vectors built to sit at a chosen cosine.

Chunks get real embeddings from the real model unless the test hands in its own vectors
(to control exactly which chunk is nearest).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence

import numpy as np
from django.conf import settings

from knowledge import embedding
from knowledge.models import Chunk, Collection, Document, Embedding

LEAVE_TEXTS = [
    "Full-time employees receive 25 days of paid annual leave per calendar year. "
    "Part-time employees receive a pro-rata share based on their contracted hours. "
    "Leave requests must be submitted through the HR portal at least two weeks in advance.",
    "Up to five days of unused annual leave may be carried over into the next year. "
    "Carried-over days expire on 31 March and are not paid out. "
    "Managers may approve exceptions for staff on long-term sick leave.",
]
EXPENSES_TEXTS = [
    "Travel expenses are reimbursed when a receipt is attached to the claim. "
    "Claims must be filed within 30 days of the purchase. "
    "Economy class is required for flights shorter than six hours.",
    "The daily meal allowance while travelling is 45 euros. "
    "Alcohol is never reimbursed. "
    "Hotel bookings go through the travel desk.",
]
# A career told in order: a follow-up ("What did he do after that?") goes on through it.
CAREER_TEXT = (
    "Carter grew up in Ohio and studied music in Boston. In 1990 Carter joined the band Slowdive "
    "as its drummer. Two years later Carter left to record a solo album, which sold poorly. "
    "After that Carter taught at a music school in Chicago. Carter also wrote film scores."
)
SECURITY_TEXTS = [
    "Passwords must be at least 14 characters long and must never be reused. "
    "Multi-factor authentication is mandatory for every company account. "
    "Report a lost laptop to the IT helpdesk within one hour.",
]


def unit(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """`values` scaled to length 1 (float32), as the model's embeddings are."""
    vector = np.asarray(values, dtype=np.float64)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def basis(axis: int, dimensions: int = embedding.DIMENSIONS) -> np.ndarray:
    """The unit vector along `axis`."""
    vector = np.zeros(dimensions, dtype=np.float32)
    vector[axis] = 1.0
    return vector


def vector_at_cosine(target: np.ndarray, cosine: float, *, away_axis: int) -> list[float]:
    """A unit vector whose cosine similarity to the unit vector `target` is `cosine`: its
    component along `target` is `cosine`, the rest lies along a basis axis orthogonal to it."""
    other = basis(away_axis).astype(np.float64)
    target = target.astype(np.float64)
    other = other - (other @ target) * target
    other /= np.linalg.norm(other)
    vector = cosine * target + np.sqrt(1.0 - cosine**2) * other
    return [float(v) for v in vector]


def document_create(
    *,
    title: str,
    texts: Sequence[str],
    pages: Sequence[int | None] | None = None,
    sections: Sequence[str | None] | None = None,
    vectors: Sequence[np.ndarray] | np.ndarray | None = None,
    enabled: bool = True,
    status: str = Document.Status.READY,
    url: str = "",
    source: str | None = None,
    metadata: dict | None = None,
    model: str | None = None,
    media_type: str = "text/markdown",
    collection: Collection | None = None,
) -> Document:
    """A searchable document whose chunks are `texts` (embedded by the model, or `vectors`).

    `url` is stored as the document's link (`metadata["url"]`); `model` overrides the
    embedding model name (e.g. to make the embeddings stale); `collection` defaults to General.
    Raises ValueError when
    `vectors` is given with a different length than `texts`.
    """
    document = Document.objects.create(
        title=title,
        source=source or f"test:{uuid.uuid4().hex}/{title}",
        media_type=media_type,
        content_hash=hashlib.sha256("\n".join(texts).encode()).hexdigest(),
        status=status,
        enabled=enabled,
        metadata={**(metadata or {}), **({"url": url} if url else {})},
        **({"collection": collection} if collection is not None else {}),
    )
    chunks_replace(
        document, texts=texts, pages=pages, sections=sections, vectors=vectors, model=model
    )
    return document


# The real model's vectors of each list of texts this process embedded for a test's knowledge
# base, by model version and batch settings: the same texts give the same vectors, so the
# tests that build the same documents pay the model once per worker (docs/decisions/0170,
# eleventh round). One entry per distinct list the tests write, 384 floats a text.
_EMBEDDED: dict[tuple, np.ndarray] = {}


def texts_embedded(texts: Sequence[str]) -> np.ndarray:
    """The real model's vectors of `texts` (`embedding.embed_texts`), the first time these
    texts are embedded by this model (and batch settings) in this process; after that a copy
    of them."""
    key = (
        embedding.model_version(),
        settings.EMBEDDING_BATCH_SIZE,
        settings.EMBEDDING_BATCH_TOKENS,
        tuple(texts),
    )
    if key not in _EMBEDDED:
        _EMBEDDED[key] = np.asarray(embedding.embed_texts(list(texts)), dtype=np.float32)
    return _EMBEDDED[key].copy()


def chunks_replace(
    document: Document,
    *,
    texts: Sequence[str],
    pages: Sequence[int | None] | None = None,
    sections: Sequence[str | None] | None = None,
    vectors: Sequence[np.ndarray] | np.ndarray | None = None,
    model: str | None = None,
) -> list[Chunk]:
    """Replace the document's chunks, as re-ingesting a changed file does. Raises ValueError
    when `vectors` is given with a different length than `texts`."""
    document.chunks.all().delete()
    if vectors is None:
        vectors = texts_embedded(texts)
    if len(vectors) != len(texts):
        raise ValueError("one vector per text is needed")
    chunks = []
    offset = 0
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
                token_count=embedding.token_count(text),
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
    return chunks
