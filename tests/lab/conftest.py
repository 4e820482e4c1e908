"""Fixtures of the lab tests (`evaluate`, `bench`)."""

from __future__ import annotations

import json

import pytest

from tests.support.datasets import DOCUMENTS, QUESTIONS


@pytest.fixture
def tiny_dataset(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({"name": "tiny", "documents": DOCUMENTS, "questions": QUESTIONS}))
    return path
