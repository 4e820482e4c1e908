"""`manage.py bench_insights` on a few hundred exchanges: every figure is reported (timings are
printed, never asserted), the throwaway database is dropped, bad options are refused."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from lab.management.commands.bench_insights import DATABASE_PREFIX


def _databases() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT datname FROM pg_database")
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_bench_insights_reports_every_figure_and_leaves_nothing_behind(tmp_path):
    before = _databases()
    out = StringIO()
    json_path = tmp_path / "insights.json"

    call_command(
        "bench_insights",
        "--exchanges",
        "400",
        "--rounds",
        "1",
        "--json",
        str(json_path),
        stdout=out,
        stderr=StringIO(),
    )

    figures = json.loads(json_path.read_text())
    print(out.getvalue())
    assert figures["exchanges"] == 400
    assert figures["citations"] > 400  # 1 to 3 per answered exchange, 80% answered
    assert set(figures["pages"]) == {
        "superuser days=30",
        "superuser days=90",
        "reader days=30",
        "reader days=90",
        "superuser days=90&by=day",
    }
    for page in figures["pages"].values():
        assert page["median_ms"] > 0 and page["statements"] > 0
        assert page["python_cpu_ms"] >= 0
    assert 350 <= figures["export"]["rows"] <= 400  # 90 days of the 90 loaded, less today's
    assert "Insights page with 400 exchanges" in out.getvalue()
    # None of its databases is left (another test worker's `manage.py bench` may be running at
    # the same moment, with a `sourced_bench_<pid>` database of its own).
    assert not {name for name in _databases() - before if name.startswith(DATABASE_PREFIX)}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--exchanges", "0"], "--exchanges must be between"),
        (["--rounds", "0"], "--rounds must be between"),
        (["--json", "/nonexistent/folder/out.json"], "no such folder"),
    ],
)
def test_bench_insights_refuses_bad_options(options, message):
    with pytest.raises(CommandError, match=message):
        call_command("bench_insights", *options)
