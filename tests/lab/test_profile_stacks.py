"""lab/benchmark/stacks.py: a sampling profile's stacks summed per question, computing apart
from waiting."""

from __future__ import annotations

import pytest

from lab.benchmark.stacks import main, per_question, stacks_read

_ROOT = 'process 1:"daphne";run (loop.py:10)'
_SEARCH = f"{_ROOT};answer (chat/consumers.py:5);chunks_search (knowledge/retrieval.py:170)"
PROFILE = "\n".join(
    [
        f"{_SEARCH};Cursor.execute (psycopg/cursor.py:9);Connection.wait (psycopg/conn.py:3) 30",
        f"{_SEARCH};SQLCompiler.as_sql (django/compiler.py:7) 50",
        f"{_ROOT};answer (chat/consumers.py:6);final_html (chat/socket_render.py:60) 20",
        f"{_ROOT};EpollSelector.select (selectors.py:468) 100",
    ]
)


def test_each_function_sums_the_stacks_holding_it_computing_apart_from_waiting():
    stacks = stacks_read(PROFILE.splitlines())
    assert len(stacks) == 4
    # 100 samples a second: a sample is 10 ms of one thread; 10 questions.
    figures = per_question(
        stacks, ["chunks_search (", "final_html (", "answer ("], rate=100, questions=10
    )
    assert figures["chunks_search ("] == pytest.approx((50.0, 30.0))
    assert figures["final_html ("] == pytest.approx((20.0, 0.0))
    assert figures["answer ("] == pytest.approx((70.0, 30.0))


def test_the_command_prints_the_whole_process_first(tmp_path, capsys):
    profile = tmp_path / "server.raw"
    profile.write_text(PROFILE)
    main([str(profile), "--rate", "100", "--questions", "10", "final_html ("])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[-2:] == ["70.0", "130.0"]
    assert lines[2].split()[-2:] == ["20.0", "0.0"]
