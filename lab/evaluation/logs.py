"""The product's per-exchange log lines (`sourced.exchange`, `.retrieval`, `.citations`,
`.summary`), silenced while a measurement command runs: one line per question would bury the
table it prints."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

PER_EXCHANGE_LOGGERS = (
    "sourced.exchange",
    "sourced.retrieval",
    "sourced.citations",
    "sourced.summary",
)


@contextmanager
def per_exchange_logs_quiet(*, keep: tuple[str, ...] = ()) -> Iterator[None]:
    """The per-exchange loggers at WARNING until the block ends (then as they were), but
    those named in `keep` (a command that reads one of them itself)."""
    loggers = [logging.getLogger(name) for name in PER_EXCHANGE_LOGGERS if name not in keep]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
