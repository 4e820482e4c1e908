"""The embedding model and its tokenizer used from several threads at once from the start, as a
fresh server process uses them (the warm-up thread and the first questions' worker threads): never
an error. Without the locks in knowledge/embedding.py, threads meeting in the first import of
transformers failed with "ImportError: cannot import name 'AutoTokenizer' from 'transformers'"
(a half-initialised lazy module), and a question failed with a 500."""

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

    from tests.support.live_server import database_url_of

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


TOKENIZER_SCRIPT = """
import django
django.setup()
from concurrent.futures import ThreadPoolExecutor
from knowledge import embedding

long_text = " ".join(f"word{n} and another phrase about leave" for n in range(400))
texts = [long_text[: 200 + 37 * i] for i in range(40)]

def work(i):
    total = 0
    for _ in range(10):
        total += embedding.truncate_to_limit(texts[i % len(texts)])[0].count(" ")
        total += sum(embedding.token_counts(texts[: 1 + i % 8]))
    return total

with ThreadPoolExecutor(max_workers=8) as pool:
    assert all(pool.map(work, range(24)))
print("ok")
"""


def test_a_fresh_process_tokenizes_in_many_threads_at_once():
    result = subprocess.run(
        [sys.executable, "-c", TOKENIZER_SCRIPT],
        cwd=settings.BASE_DIR,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")
