"""The CPU of each stage of an exchange: counted in the thread that runs it, for the log line and
`manage.py bench` (chat/answering/stage_cpu.py, lab/benchmark/stages.py)."""

from __future__ import annotations

import json
import threading

from chat.answering.stage_cpu import cpu_stage, stage_cpu_begin
from lab.benchmark.stages import stage_cpu_per_question, stages_text


@cpu_stage("busy")
def _busy(n: int) -> int:
    return sum(i * i for i in range(n))


def test_a_stage_counts_the_cpu_of_the_thread_that_runs_it():
    assert _busy(10) == 285  # outside an exchange: only called
    counts = stage_cpu_begin()
    _busy(200_000)
    first = counts["busy"]
    assert first > 0
    done = threading.Event()

    def other_thread() -> None:  # the context is carried in, as sync_to_async does
        _busy(200_000)
        done.set()

    import contextvars

    threading.Thread(target=contextvars.copy_context().run, args=(other_thread,)).start()
    assert done.wait(10)
    assert counts["busy"] > first


def test_bench_reads_the_stages_from_the_server_log(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("2026-11-28 INFO sourced.exchange " + json.dumps({"event": "x"}) + "\n")
    start = log.stat().st_size
    lines = [
        {"event": "chat.exchange", "cpu_ms": {"store": 2.0, "retrieve": 4.0}},
        {"event": "chat.exchange", "cpu_ms": {"store": 4.0}},
        {"event": "chat.exchange"},  # no stages: not counted
    ]
    with log.open("a") as out:
        out.write("not json {\n")
        for line in lines:
            out.write(f"2026-11-28 INFO sourced.exchange {json.dumps(line)}\n")
    stages = stage_cpu_per_question(log, start)
    assert stages == {"retrieve": 2.0, "store": 3.0}
    assert stages_text(stages) == "retrieve 2.0 · store 3.0 (sum 5.0)"
    assert stage_cpu_per_question(log, log.stat().st_size) == {}
