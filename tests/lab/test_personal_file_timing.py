"""The personal-file reading time measurement (lab/benchmark/personal_files.py) reads a real
PDF through the worker's task and reports a ready file's chunks."""

from __future__ import annotations

import pytest

from knowledge.models import Document
from lab.benchmark.personal_files import personal_file_ready_seconds

pytestmark = pytest.mark.django_db


def test_a_measured_file_is_read_to_ready_and_leaves_nothing_behind():
    seconds, chunks = personal_file_ready_seconds(pages=2)

    assert seconds > 0 and chunks >= 2
    assert not Document.objects.exists()  # deleted with its user
