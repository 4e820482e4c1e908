"""An embedded PostgreSQL of a test's own, in a temporary folder (never the suite's), driven
through the commands an operator uses (`python -m config.embedded_db`, `manage.py …`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings


def python_run(args: list[str], env: dict[str, str], timeout: float = 300) -> str:
    """`python *args` in the project's folder with `env`; its output (stripped). Fails the
    test when it exits with an error."""
    result = subprocess.run(
        [sys.executable, *args],
        cwd=Path(settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def embedded_server_env(data_dir: Path) -> dict[str, str]:
    """This process's environment pointed at an embedded server in `data_dir` (no
    DATABASE_URL, no pool): what `python -m config.embedded_db` starts and stops."""
    base = {k: v for k, v in os.environ.items() if k not in ("DB_POOL", "DATABASE_URL")}
    return {**base, "EMBEDDED_PGDATA": str(data_dir)}
