"""A file that keeps its parser busy past PARSE_TIME_LIMIT_SECONDS fails with a readable
message instead of holding the worker (or the `ingest` command) for ever."""

from __future__ import annotations

import signal
import time

import pytest

from knowledge import parsers
from knowledge.parsers import DocumentParseError, document_parse


def busy(data: bytes, builder) -> str | None:
    while True:  # a parser looping on a pathological file (pure Python, as pypdf is)
        pass


def test_a_parser_busy_past_the_limit_fails_readably_and_quickly(monkeypatch):
    monkeypatch.setattr(parsers, "PARSE_TIME_LIMIT_SECONDS", 0.5)
    monkeypatch.setitem(parsers.PARSERS, ".txt", busy)

    started = time.monotonic()
    with pytest.raises(DocumentParseError, match=r"longer than 0\.5 s") as caught:
        document_parse(data=b"anything", name="slow.txt")

    assert time.monotonic() - started < 5
    assert "slow.txt" in str(caught.value)


def test_the_limit_leaves_no_alarm_behind():
    before = signal.getsignal(signal.SIGALRM)

    document_parse(data=b"Leave is 25 days a year.", name="leave.txt")

    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert signal.getsignal(signal.SIGALRM) is before


def test_a_parse_off_the_main_thread_is_not_limited_but_still_works(monkeypatch):
    """Signals belong to the main thread: elsewhere (a web request running the immediate task
    backend) parsing runs without the limit rather than failing."""
    import threading

    monkeypatch.setattr(parsers, "PARSE_TIME_LIMIT_SECONDS", 0.01)
    results: list[object] = []
    thread = threading.Thread(
        target=lambda: results.append(document_parse(data=b"Text here.", name="a.txt"))
    )
    thread.start()
    thread.join()

    assert results and results[0].text == "Text here."


def test_a_format_ocr_may_read_is_given_the_ocr_budget_and_a_minute(settings):
    settings.OCR_MAX_SECONDS = 1200

    assert parsers.parse_time_limit(".pdf") == 1260
    assert parsers.parse_time_limit(".tiff") == 1260
    assert parsers.parse_time_limit(".docx") == parsers.PARSE_TIME_LIMIT_SECONDS
