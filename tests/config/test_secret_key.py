"""The secret key: production (`DJANGO_SECURE=1`) refuses to start without DJANGO_SECRET_KEY;
elsewhere the generated development key is readable by its owner only. Each test starts the
settings in a process of its own, as a server would."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from tests.support.live_server import BASE_DIR

# Importing the settings connects to nothing: any PostgreSQL URL will do.
SETTINGS_ENV = {"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/nothing"}
PRINT_KEY = "import config.settings as s; print(len(s.SECRET_KEY))"


def _environment(**env: str) -> dict[str, str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in {"DJANGO_SECRET_KEY", "DJANGO_SECURE", "PYTHONPATH"}
    }
    return {**environment, **SETTINGS_ENV, **env}


def _settings_copy(root: Path) -> Path:
    """config/settings.py in a project folder of its own (its data folder is `root/.data`)."""
    (root / "config").mkdir()
    (root / "config" / "__init__.py").write_text("")
    shutil.copy(BASE_DIR / "config" / "settings.py", root / "config" / "settings.py")
    return root / ".data" / "secret_key"


def _import_settings(root: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PRINT_KEY],
        cwd=root,
        env=_environment(**env),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_without_a_secret_key_refuses_to_start():
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=BASE_DIR,
        env=_environment(DJANGO_SECURE="1", DJANGO_SETTINGS_MODULE="config.settings"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "DJANGO_SECURE=1 needs DJANGO_SECRET_KEY" in result.stderr


def test_production_with_a_secret_key_starts_with_it(tmp_path):
    key_file = _settings_copy(tmp_path)
    result = _import_settings(tmp_path, DJANGO_SECURE="1", DJANGO_SECRET_KEY="k" * 60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "60"
    assert not key_file.exists()  # nothing generated


def test_the_development_key_is_generated_readable_by_its_owner_only(tmp_path):
    key_file = _settings_copy(tmp_path)
    first = _import_settings(tmp_path)
    assert first.returncode == 0, first.stderr
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(key_file.read_text().strip()) >= 50
    key = key_file.read_text()
    assert _import_settings(tmp_path).returncode == 0
    assert key_file.read_text() == key  # kept, not generated again


def test_a_development_key_readable_by_others_is_made_owner_only(tmp_path):
    key_file = _settings_copy(tmp_path)
    key_file.parent.mkdir()
    key_file.write_text("an-older-key-written-world-readable-" + "x" * 30)
    key_file.chmod(0o644)
    result = _import_settings(tmp_path)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert result.stdout.strip() == str(len(key_file.read_text().strip()))
