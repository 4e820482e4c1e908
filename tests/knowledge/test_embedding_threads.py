"""The shared tokenizer under concurrent use from the start, as a fresh server process uses it
(the warm-up thread and the first questions' worker threads at once): never an error. Without
the lock in `embedding.tokenize`, threads meeting in the tokenizer's first load failed with
"ImportError: cannot import name 'AutoTokenizer' from 'transformers'" (a half-initialised lazy
module), and a question failed with a 500."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
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
        [sys.executable, "-c", SCRIPT],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().endswith("ok")
