"""Ingestion embeds each distinct text once (docs/decisions/0085-personal-file-reading-time.md):
a chunk without a heading that is also one answerable sentence is the same model input under
two keys; the model sees it once and both keys get the same vector, the one the model gives
that text alone."""

from __future__ import annotations

import numpy as np

from knowledge import embedding
from knowledge.services.vectors import texts_embed


def test_a_text_under_several_keys_is_embedded_once(monkeypatch):
    seen: list[list[str]] = []
    real = embedding.embed_texts

    def recording(texts, **options):
        seen.append(list(texts))
        return real(texts, **options)

    monkeypatch.setattr(embedding, "embed_texts", recording)
    text = "Annual leave accrues at two and a half days for each complete month of service."
    other = "The notice period is three months."
    missing = {("hash-1", ""): text, ("sentence", "hash-1"): text, ("hash-2", ""): other}

    vectors = texts_embed(missing)

    assert seen == [[text, other]]
    assert set(vectors) == set(missing)
    assert np.array_equal(vectors[("hash-1", "")], vectors[("sentence", "hash-1")])
    alone = real([text])[0]
    assert np.allclose(vectors[("hash-1", "")], alone, atol=1e-6)
    assert not np.allclose(vectors[("hash-2", "")], alone, atol=1e-3)
