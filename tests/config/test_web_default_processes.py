"""How many daphne processes `python -m config.web` (and so `bin/serve`) runs by default: two
with REDIS_URL (a Stop is routed between them through Redis), one without (the in-memory
channel layer reaches only its own process), and a warning when more are asked without Redis."""

from __future__ import annotations

import pytest

from config import web


@pytest.mark.parametrize(
    ("env", "processes"),
    [
        ({}, 1),
        ({"REDIS_URL": "redis://127.0.0.1:6379/0"}, 2),
        ({"WEB_PROCESSES": "3"}, 3),
        ({"WEB_PROCESSES": "1", "REDIS_URL": "redis://127.0.0.1:6379/0"}, 1),
    ],
    ids=["no-redis", "redis", "asked-without-redis", "asked-with-redis"],
)
def test_one_process_without_redis_unless_asked(monkeypatch, env, processes):
    for name in ("REDIS_URL", "WEB_PROCESSES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert web.processes_default() == processes


def test_more_processes_without_redis_are_warned_about(monkeypatch, capsys):
    monkeypatch.delenv("REDIS_URL", raising=False)
    served = []
    monkeypatch.setattr(web, "serve", lambda **kwargs: served.append(kwargs) or 0)
    assert web.main(["--processes", "2"]) == 0
    assert served[0]["processes"] == 2
    assert "a Stop pressed in a tab served by another process" in capsys.readouterr().err
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/0")
    assert web.main(["--processes", "2"]) == 0
    assert capsys.readouterr().err == ""
