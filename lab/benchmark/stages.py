"""The server's CPU per question, stage by stage: read from the server's log, whose line per
exchange (`sourced.exchange`) carries the CPU milliseconds of each stage (`cpu_ms`:
chat/answering/stage_cpu.py; docs/decisions/0150-answer-cost-per-question.md)."""

from __future__ import annotations

import json
from pathlib import Path

_MARKER = '"event": "chat.exchange"'


def log_offset(log_path: Path) -> int:
    """Where the server's log ends now (where the next run's lines start)."""
    try:
        return log_path.stat().st_size
    except OSError:
        return 0


def stage_cpu_per_question(log_path: Path, offset: int) -> dict[str, float]:
    """The mean CPU milliseconds per exchange of each stage, over the exchange lines written to
    the log after `offset` (a stage an exchange did not run counts 0 for it); {} when none."""
    try:
        with log_path.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
    except OSError:
        return {}
    totals: dict[str, float] = {}
    exchanges = 0
    for line in text.splitlines():
        start = line.find("{")
        if _MARKER not in line or start < 0:
            continue
        try:
            record = json.loads(line[start:])
        except ValueError:
            continue
        stages = record.get("cpu_ms")
        if not isinstance(stages, dict):
            continue
        exchanges += 1
        for stage, ms in stages.items():
            if isinstance(ms, (int, float)):
                totals[stage] = totals.get(stage, 0.0) + float(ms)
    if not exchanges:
        return {}
    return {stage: round(ms / exchanges, 2) for stage, ms in sorted(totals.items())}


def stages_text(stages: dict[str, float]) -> str:
    """ "store 1.2 · plan 0.4 · …" (ms), and their sum."""
    if not stages:
        return "—"
    parts = " · ".join(f"{stage} {ms:.1f}" for stage, ms in stages.items())
    return f"{parts} (sum {sum(stages.values()):.1f})"
