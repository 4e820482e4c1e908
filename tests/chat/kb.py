"""Controlled knowledge bases for chat tests: documents, chunks and embeddings written directly
(the real model embeds the texts unless a test hands in its own vectors), plus the checks
every answer must pass."""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Sequence

import numpy as np

from chat.answering.events import Event
from knowledge import embedding
from knowledge.models import Chunk, Document, Embedding

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
SECURITY_TEXTS = [
    "Passwords must be at least 14 characters long and must never be reused. "
    "Multi-factor authentication is mandatory for every company account. "
    "Report a lost laptop to the IT helpdesk within one hour.",
]


def unit(values: Sequence[float] | np.ndarray) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float64)
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def basis(axis: int) -> np.ndarray:
    vector = np.zeros(embedding.DIMENSIONS, dtype=np.float32)
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
) -> Document:
    """A searchable document whose chunks are `texts` (embedded by the model, or `vectors`)."""
    document = Document.objects.create(
        title=title,
        source=f"test:{uuid.uuid4().hex}/{title}",
        media_type="text/markdown",
        content_hash=hashlib.sha256("\n".join(texts).encode()).hexdigest(),
        status=status,
        enabled=enabled,
        metadata={"url": url} if url else {},
    )
    chunks_replace(document, texts=texts, pages=pages, sections=sections, vectors=vectors)
    return document


def chunks_replace(
    document: Document,
    *,
    texts: Sequence[str],
    pages: Sequence[int | None] | None = None,
    sections: Sequence[str | None] | None = None,
    vectors: Sequence[np.ndarray] | np.ndarray | None = None,
) -> list[Chunk]:
    """Replace the document's chunks, as re-ingesting a changed file does."""
    document.chunks.all().delete()
    if vectors is None:
        vectors = embedding.embed_texts(list(texts))
    chunks = Chunk.objects.bulk_create(
        Chunk(
            document=document,
            index=index,
            text=text,
            page=pages[index] if pages else None,
            section=sections[index] if sections else None,
            char_start=0,
            char_end=len(text),
            token_count=embedding.token_count(text),
            text_hash=hashlib.sha256(text.encode()).hexdigest(),
        )
        for index, text in enumerate(texts)
    )
    Embedding.objects.bulk_create(
        Embedding(chunk=chunk, vector=np.asarray(vector).tolist(), model=embedding.model_version())
        for chunk, vector in zip(chunks, vectors, strict=True)
    )
    return chunks


def event_types(events: Sequence[Event]) -> list[str]:
    return [event.type for event in events]


_MARKER = re.compile(r" \[(\d+)\]")


def assert_answer_is_grounded(content: str, citations: Sequence[dict]) -> None:
    """Every sentence of the answer is verbatim text of the chunk its marker cites; markers are
    numbered 1.. in order of first use; the citations are exactly the cited chunks."""
    by_n = {citation["n"]: citation for citation in citations}
    parts = _MARKER.split(content)
    assert parts[-1] == "", f"the answer must end with a marker: {content!r}"
    sentences, numbers = parts[0:-1:2], [int(n) for n in parts[1::2]]
    assert sentences, "an answer has at least one sentence"
    first_use = list(dict.fromkeys(numbers))
    assert first_use == list(range(1, len(first_use) + 1)), f"markers out of order: {numbers}"
    assert sorted(by_n) == first_use, "citations must be exactly the cited chunks"
    assert len(sentences) <= 3
    for sentence, n in zip(sentences, numbers, strict=True):
        text = sentence.strip()
        assert text, "empty sentence before a marker"
        assert text in by_n[n]["text"], f"{text!r} is not verbatim text of citation [{n}]"
