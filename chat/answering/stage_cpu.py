"""The CPU time of each stage of one exchange, for its log line (`cpu_ms`) and `manage.py bench`
(docs/decisions/0150-answer-cost-per-question.md).

`stage_cpu_begin()` starts the count of the exchange running in the current context (the
pipeline calls it first); a function decorated with `@cpu_stage("name")` adds the CPU time of
the thread that runs it (`time.thread_time`) to its stage, in whatever thread it runs: the
context is carried into `sync_to_async`'s threads. Outside an exchange the decorator only calls
the function. Work a stage hands to a thread that is not its own reports its CPU with
`stage_cpu_add` (the question's share of the embedding batcher's model call); threads ONNX
Runtime starts itself (its pool, when it runs on more than one) are not counted.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

_current: ContextVar[dict[str, float] | None] = ContextVar("exchange_stage_cpu", default=None)


def stage_cpu_begin() -> dict[str, float]:
    """A new count for the exchange of the current context: stage → CPU milliseconds."""
    counts: dict[str, float] = {}
    _current.set(counts)
    return counts


def cpu_stage(stage: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Count the thread CPU time of each call of the decorated (synchronous) function under
    `stage`, when it runs for an exchange."""

    def decorate(function: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(function)
        def counted(*args: P.args, **kwargs: P.kwargs) -> R:
            counts = _current.get()
            if counts is None:
                return function(*args, **kwargs)
            started = time.thread_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent = (time.thread_time() - started) * 1000
                counts[stage] = counts.get(stage, 0.0) + spent

        return counted

    return decorate


def stage_cpu_add(stage: str, ms: float) -> None:
    """Add `ms` of CPU spent for the current exchange in another thread to `stage` (nothing
    outside an exchange)."""
    counts = _current.get()
    if counts is not None and ms:
        counts[stage] = counts.get(stage, 0.0) + ms


def stage_cpu_rounded(counts: dict[str, float]) -> dict[str, float]:
    """`counts` rounded to 0.01 ms, for the log line."""
    return {stage: round(ms, 2) for stage, ms in sorted(counts.items())}
