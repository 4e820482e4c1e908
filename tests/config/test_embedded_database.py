"""The embedded PostgreSQL takes shared buffers sized for the machine when it first starts, and
a later caller that finds them missing from its data directory writes them, restarting the
server only when no other session is connected
(docs/decisions/0154-the-embedded-database-s-memory.md).

The test runs its own embedded PostgreSQL in a temporary folder (never the suite's), through
the command an operator uses: `python -m config.embedded_db`.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import config.embedded_db
from config.embedded_db import (
    SETTINGS_REFUSED,
    SHARED_BUFFERS_MAX_MB,
    SHARED_BUFFERS_MIN_MB,
    embedded_database_url,
    memory_mb_available,
    shared_buffers_mb,
    stop_embedded_server,
)
from tests.support.embedded_server import embedded_server_env, python_run

pytestmark = pytest.mark.slow


def _command(control: dict[str, str], *args: str) -> str:
    """`python -m config.embedded_db *args`: its last line of output."""
    return python_run(["-m", "config.embedded_db", *args], control).splitlines()[-1]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory) -> Iterator[tuple[str, dict[str, str]]]:
    """A new embedded server of this test's own: (its URL, the environment that points the
    project's processes at it)."""
    data_dir = tmp_path_factory.mktemp("embedded") / "postgres"
    control = embedded_server_env(data_dir)
    url = _command(control)
    yield url, control
    _command(control, "stop")


def _shared_buffers_mb(connection: psycopg.Connection) -> int:
    (pages,) = connection.execute(
        "SELECT setting::int FROM pg_settings WHERE name = 'shared_buffers'"
    ).fetchone()
    return pages * 8 // 1024  # in pages of 8 kB


def _started(connection: psycopg.Connection):  # noqa: ANN202
    return connection.execute("SELECT pg_postmaster_start_time()").fetchone()[0]


def _settings_forget(url: str) -> None:
    """The data directory without the setting (the running server keeps its own)."""
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("ALTER SYSTEM RESET shared_buffers")


def test_a_new_embedded_server_has_shared_buffers_sized_for_the_machine(embedded):
    url, _ = embedded
    with psycopg.connect(url) as connection:
        assert _shared_buffers_mb(connection) == shared_buffers_mb()


def test_the_setting_is_written_without_a_restart_while_a_session_is_connected(embedded):
    url, control = embedded
    _settings_forget(url)
    with psycopg.connect(url, autocommit=True) as held:
        started = _started(held)
        _command(control)  # finds the setting missing; another session is connected
        assert held.execute("SELECT 1").fetchone() == (1,)  # not cut off
        assert _started(held) == started
        written = held.execute(
            "SELECT count(*) FROM pg_file_settings WHERE name = 'shared_buffers' "
            "AND sourcefile = current_setting('data_directory') || '/postgresql.auto.conf' "
            "AND setting = %s",
            [f"{shared_buffers_mb()}MB"],
        ).fetchone()[0]
        assert written == 1  # applies at the next start


def test_with_no_other_session_the_server_is_restarted_with_the_setting(embedded):
    url, control = embedded
    with psycopg.connect(url) as connection:
        started = _started(connection)
    _settings_forget(url)
    _command(control)
    with psycopg.connect(url) as connection:
        assert _started(connection) > started
        assert _shared_buffers_mb(connection) == shared_buffers_mb()
    before = started
    with psycopg.connect(url) as connection:
        started = _started(connection)
    _command(control)  # the setting is there: nothing to do, no restart
    with psycopg.connect(url) as connection:
        assert _started(connection) == started > before


def test_an_operator_s_own_setting_is_kept(embedded):
    url, control = embedded
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute("ALTER SYSTEM SET shared_buffers = '256MB'")
        started = _started(connection)
    try:
        _command(control)
        with psycopg.connect(url) as connection:
            assert _started(connection) == started  # not restarted
            (setting,) = connection.execute(
                "SELECT setting FROM pg_file_settings WHERE name = 'shared_buffers' "
                "AND sourcefile = current_setting('data_directory') || '/postgresql.auto.conf'"
            ).fetchone()
        assert setting == "256MB"
    finally:
        _settings_forget(url)


@pytest.mark.parametrize(
    ("memory_mb", "expected"),
    [
        (256, SHARED_BUFFERS_MIN_MB),
        (2048, 512),
        (64 * 1024, SHARED_BUFFERS_MAX_MB),
    ],
)
def test_shared_buffers_are_a_quarter_of_the_memory_within_bounds(memory_mb, expected):
    assert shared_buffers_mb(memory_mb) == expected


def test_a_container_s_memory_limit_counts_when_lower_than_the_machine_s(tmp_path):
    machine = memory_mb_available(limits=())
    unlimited, limited, missing = tmp_path / "v2", tmp_path / "v1", tmp_path / "none"
    unlimited.write_text("max\n")
    limited.write_text(f"{512 * (1 << 20)}\n")
    assert memory_mb_available(limits=(unlimited, missing)) == machine
    assert memory_mb_available(limits=(unlimited, limited)) == min(machine, 512)
    limited.write_text(f"{(machine + 1024) * (1 << 20)}\n")  # above the machine's: not counted
    assert memory_mb_available(limits=(limited,)) == machine


def test_a_server_that_will_not_start_with_the_setting_is_started_without_it(tmp_path, monkeypatch):
    """Shared buffers the machine cannot map (4 TB here): the server is started again with
    PostgreSQL's default, and later callers neither try again nor restart it."""
    data_dir = tmp_path / "postgres"
    monkeypatch.setenv("EMBEDDED_PGDATA", str(data_dir))
    monkeypatch.setattr(config.embedded_db, "shared_buffers_mb", lambda: 4 * 1024 * 1024)
    try:
        url = embedded_database_url()
        with psycopg.connect(url) as connection:
            assert _shared_buffers_mb(connection) == SHARED_BUFFERS_MIN_MB
            started = _started(connection)
        assert "shared_buffers = '4194304MB'" in (data_dir / SETTINGS_REFUSED).read_text()
        assert "shared_buffers" not in (data_dir / "postgresql.auto.conf").read_text()
        embedded_database_url()  # a later caller
        with psycopg.connect(url) as connection:
            assert _started(connection) == started
    finally:
        stop_embedded_server()
