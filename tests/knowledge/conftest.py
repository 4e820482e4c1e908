"""Fixtures for the ingestion tests: real files of every supported type, and a spy that
counts what the real embedding model is asked to embed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from knowledge import embedding
from tests.support import documents


@pytest.fixture(scope="session")
def sample_files(tmp_path_factory) -> dict[str, Path]:
    """One real file of every supported type, written once per test session (read only)."""
    return documents.write_all(tmp_path_factory.mktemp("sample-documents"))


@pytest.fixture
def documents_dir(sample_files, tmp_path) -> Path:
    """A private copy of the sample files that a test may change or extend."""
    folder = tmp_path / "documents"
    folder.mkdir()
    for path in sample_files.values():
        shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture
def embedded_texts(monkeypatch) -> list[str]:
    """Every text handed to the embedding model during the test (the real model still
    computes the vectors)."""
    seen: list[str] = []
    real = embedding.embed_texts

    def spy(texts, *args, **kwargs):
        seen.extend(texts)
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(embedding, "embed_texts", spy)
    return seen
