"""A parse that cannot kill the worker (knowledge/parsers/isolated.py,
docs/decisions/0147-a-parse-that-cannot-kill-the-worker.md): each document is parsed in a
child process with an address-space limit and a time limit of its own; a parser that
allocates without bound, hangs in C code or dies fails its document readably, and the
process that asked goes on ingesting. The hostile parsers are in tests/support/hostile.py."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from knowledge import parsers
from knowledge.models import Document
from knowledge.parsers import DocumentParseError, isolated
from knowledge.parsers.isolated import PARSER_SETTINGS, document_parse_isolated
from knowledge.services import document_ingest
from tests.support import hostile


def test_a_parser_allocating_without_bound_fails_its_document_and_ingestion_goes_on(
    db, tmp_path: Path, settings, monkeypatch
):
    settings.PARSE_MEMORY_LIMIT = 512 * 2**20
    monkeypatch.setitem(parsers.PARSERS, ".txt", hostile.parse_hungry)
    bomb = tmp_path / "bomb.txt"
    bomb.write_text("anything")

    started = time.monotonic()
    outcome = document_ingest(path=bomb)

    assert time.monotonic() - started < 30
    assert outcome.action == "failed"
    failed = Document.objects.get(source=str(bomb.resolve()))
    assert failed.status == Document.Status.FAILED
    assert failed.error == (
        "Reading bomb.txt needed more than 512 MB of memory: the file is too large or made "
        "to exhaust the server, and was stopped."
    )
    monkeypatch.undo()
    fine = tmp_path / "leave.md"
    fine.write_text("# Leave\n\nAnnual leave is 25 days a year.\n")
    assert document_ingest(path=fine).action == "new"
    assert Document.objects.get(source=str(fine.resolve())).status == Document.Status.READY


def test_the_default_limit_is_named_in_gigabytes(settings):
    assert settings.PARSE_MEMORY_LIMIT == 1536 * 2**20
    assert isolated.memory_label(settings.PARSE_MEMORY_LIMIT) == "1.5 GB"


def test_the_child_has_neither_the_embedding_model_nor_a_database_connection(monkeypatch):
    """The model is loaded here; the child is forked from the fork server, which imported the
    parsers only."""
    import sys

    from knowledge import embedding

    assert len(embedding.embed_texts(["Annual leave"])[0]) > 0
    assert "onnxruntime" in sys.modules
    monkeypatch.setitem(parsers.PARSERS, ".txt", hostile.parse_reporting_modules)

    parsed = document_parse_isolated(data=b"anything", name="report.txt")

    assert parsed.text == "Loaded: none."


def test_a_child_stuck_past_its_time_is_killed_and_the_document_fails_readably(monkeypatch):
    monkeypatch.setattr(parsers, "PARSE_TIME_LIMIT_SECONDS", 0.5)
    monkeypatch.setattr(isolated, "PARSE_CHILD_GRACE_SECONDS", 1.0)
    monkeypatch.setitem(parsers.PARSERS, ".txt", hostile.parse_stuck)

    started = time.monotonic()
    with pytest.raises(DocumentParseError, match=r"^Reading stuck\.txt took longer than 0\.5 s"):
        document_parse_isolated(data=b"anything", name="stuck.txt")

    assert time.monotonic() - started < 10


def test_a_child_that_dies_fails_its_document_readably(monkeypatch):
    monkeypatch.setitem(parsers.PARSERS, ".txt", hostile.parse_dying)

    with pytest.raises(DocumentParseError) as caught:
        document_parse_isolated(data=b"anything", name="dies.txt")

    assert str(caught.value).startswith("Reading dies.txt stopped the reader (signal SIGABRT)")


def test_the_parsers_own_errors_and_results_come_back_as_they_are():
    with pytest.raises(DocumentParseError, match=r"^The file is empty \(empty\.txt\)\.$"):
        document_parse_isolated(data=b"  ", name="empty.txt")
    with pytest.raises(parsers.UnsupportedFileType):
        document_parse_isolated(data=b"x", name="tool.exe")
    parsed = document_parse_isolated(data=b"# Leave\n\nAnnual leave is 25 days.", name="a.md")
    assert parsed == parsers.document_parse(
        data=b"# Leave\n\nAnnual leave is 25 days.", name="a.md"
    )


def test_settings_changed_here_hold_in_the_child(settings):
    settings.OCR_MAX_PIXELS = 1_000_000
    with pytest.raises(DocumentParseError, match=r"too large \(1,100 × 1,000 pixels"):
        document_parse_isolated(data=hostile.png_claiming(1100, 1000), name="wide.png")


def test_every_setting_a_parser_reads_is_sent_to_the_child():
    folder = Path(parsers.__file__).parent
    read = {
        name
        for path in folder.glob("*.py")
        for name in re.findall(r"settings\.([A-Z][A-Z0-9_]+)", path.read_text())
    }
    assert read - {"PARSE_MEMORY_LIMIT"} <= set(PARSER_SETTINGS)


def test_a_child_after_the_first_costs_a_fork_not_a_python_start():
    document_parse_isolated(data=b"Warm.", name="warm.txt")  # the fork server is up
    started = time.monotonic()
    for number in range(10):
        document_parse_isolated(data=f"Leave {number}.".encode(), name="leave.txt")
    assert (time.monotonic() - started) / 10 < 0.5  # a Python start with the parsers: 2-3 s
