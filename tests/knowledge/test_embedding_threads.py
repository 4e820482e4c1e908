"""The embedding model and its tokenizer loaded from two threads at once, as a server does when
a question arrives during its warm-up. In a fresh interpreter: the imports are what races."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from django.conf import settings

SCRIPT = textwrap.dedent(
    """
    import os, threading, time
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django
    django.setup()
    from knowledge import embedding

    errors = []

    def run(step):
        try:
            step()
        except Exception as exc:
            errors.append(repr(exc))

    warm_up = threading.Thread(target=run, args=(embedding.get_model,))
    question = threading.Thread(target=run, args=(lambda: embedding.embed_query("Leave?"),))
    warm_up.start()
    time.sleep(0.5)  # the warm-up is importing transformers when the question comes
    question.start()
    warm_up.join()
    question.join()
    print("ERRORS", errors)
    """
)


@pytest.mark.slow
def test_a_question_during_the_model_warm_up_is_embedded(db):
    from django.db import connection

    from tests.live_server import database_url_of

    result = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DATABASE_URL": database_url_of(connection.settings_dict)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ERRORS []" in result.stdout, result.stdout[-2000:]
