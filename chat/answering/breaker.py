"""The language model's circuit breaker, in the shared Django cache (`docs/product.md §5`).

`LLM_CIRCUIT_FAILURES` (5) failed answers within `LLM_CIRCUIT_WINDOW_S` (120 s) open the
circuit: for `LLM_CIRCUIT_COOL_DOWN_S` the generative mode skips the model and answers
extractively with a notice. A successful answer forgets the failures. The last error is kept
for the admin page. The state is shared by every web process through the Django cache (the
database cache by default, Redis with REDIS_URL); the read-modify-write of the failure list is
not atomic across processes: a lost update delays opening by one failure. Why not `pybreaker`:
`docs/decisions/0026-llm-circuit-breaker-over-the-cache.md`.
Synchronous (the database cache): async callers use `database_sync_to_async`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from django.utils import timezone

logger = logging.getLogger(__name__)

FAILURES_KEY = "sourced:llm:failures"
OPEN_KEY = "sourced:llm:open-until"
LAST_ERROR_KEY = "sourced:llm:last-error"


@dataclass(frozen=True)
class LastError:
    message: str
    at: str  # ISO time


def circuit_is_open() -> bool:
    until = cache.get(OPEN_KEY)
    return until is not None and until > time.time()


def llm_failure_record(message: str) -> bool:
    """Count a failed answer; True when this failure opened the circuit."""
    now = time.time()
    window = settings.LLM_CIRCUIT_WINDOW_S
    failures = [t for t in cache.get(FAILURES_KEY, []) if now - t < window] + [now]
    cache.set(LAST_ERROR_KEY, {"message": message, "at": timezone.now().isoformat()}, None)
    if len(failures) >= settings.LLM_CIRCUIT_FAILURES:
        cool_down = settings.LLM_CIRCUIT_COOL_DOWN_S
        cache.set(OPEN_KEY, now + cool_down, cool_down)
        cache.delete(FAILURES_KEY)
        logger.error(
            "language model circuit opened for %ss after %s failures: %s",
            cool_down,
            len(failures),
            message,
        )
        return True
    cache.set(FAILURES_KEY, failures, int(window) + 1)
    return False


def recent_failures() -> int:
    """How many answers failed within the window without opening the circuit (yet)."""
    now = time.time()
    return sum(1 for t in cache.get(FAILURES_KEY, []) if now - t < settings.LLM_CIRCUIT_WINDOW_S)


def llm_success_record() -> None:
    if cache.get(FAILURES_KEY):
        cache.delete(FAILURES_KEY)


def llm_last_error() -> LastError | None:
    value = cache.get(LAST_ERROR_KEY)
    if not isinstance(value, dict):
        return None
    return LastError(message=str(value.get("message", "")), at=str(value.get("at", "")))


def circuit_reset() -> None:
    cache.delete_many([FAILURES_KEY, OPEN_KEY, LAST_ERROR_KEY])
