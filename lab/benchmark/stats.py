"""Latency summaries (milliseconds): p50 as the median, p95 as the nearest rank, as `evaluate`
reports them; the load average the figures are given with."""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence

from lab.evaluation.runner import percentile


def latency_summary(values: Sequence[float]) -> dict[str, float]:
    """{"p50", "p95", "n"} of the values (ms, one decimal); zeros for no values."""
    if not values:
        return {"p50": 0.0, "p95": 0.0, "n": 0}
    return {
        "p50": round(statistics.median(values), 1),
        "p95": round(percentile(list(values), 0.95), 1),
        "n": len(values),
    }


def int_list_parse(text: str, *, name: str, low: int, high: int) -> list[int]:
    """ "10000,100000" → [10000, 100000] (sorted, without repeats); ValueError saying what is
    wrong otherwise."""
    items = [item.strip().replace("_", "") for item in str(text).split(",")]
    if not items or any(not item for item in items):
        raise ValueError(f"{name} must be a comma-separated list of whole numbers, got {text!r}.")
    values = []
    for item in items:
        if not item.isdigit():
            raise ValueError(f"{name}: {item!r} is not a positive whole number.")
        value = int(item)
        if not low <= value <= high:
            raise ValueError(f"{name}: {value} is out of range ({low}..{high}).")
        values.append(value)
    return sorted(set(values))


def load_average() -> float | None:
    """The machine's 1-minute load average (other processes competing for the CPU); None
    where the system does not tell it."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None
