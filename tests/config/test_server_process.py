"""What a server process (one that imports config.asgi, as daphne does) does differently from
management commands and tests: pooled database connections, the embedding model loaded at
startup on one thread (ONNX Runtime's intra-op threads), without torch or the MCP SDK, what
start-up made set aside from the cyclic garbage collector, and none of it passed on to
processes it starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection

from tests.support.live_server import database_url_of

pytestmark = pytest.mark.django_db

SERVER_DEFAULTS = ("DB_POOL", "EMBEDDING_THREADS", "EMBEDDING_WARM_UP", "EMBEDDING_BATCH_WINDOW_MS")

PROBE = """
import gc, json, os, sys, threading, time
if sys.argv[1] == "server":
    import config.asgi  # noqa: F401
else:
    import django
    django.setup()
from django.db import connection
from knowledge import embedding, vocabulary
connection.ensure_connection()
pool = connection.pool
connection.close()
warm_up = [t for t in threading.enumerate() if t.name == "embedding-warm-up"]
for thread in warm_up:
    thread.join(300)
threads = []
if embedding._load_model.cache_info().currsize:
    options = embedding.get_model().session.get_session_options()
    threads.append(options.intra_op_num_threads)
print(json.dumps({
    "pool": pool is not None,
    "pooled_after_close": pool.get_stats()["pool_available"] if pool else None,
    "model_loaded": embedding._load_model.cache_info().currsize == 1,
    "vocabulary_built": vocabulary.vocabulary_built(),
    "model_threads": threads[0] if threads else None,
    "torch_imported": "torch" in sys.modules,
    "mcp_imported": "mcp" in sys.modules,
    "http_client_imported": "httpx" in sys.modules,
    "environment": sorted(set(os.environ) & set(sys.argv[2].split(","))),
    "gc_frozen": gc.get_freeze_count(),
    "gc_tracked": len(gc.get_objects()),
}))
"""


def probe(kind: str) -> dict:
    environment = {name: value for name, value in os.environ.items() if name not in SERVER_DEFAULTS}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, kind, ",".join(SERVER_DEFAULTS)],
        cwd=settings.BASE_DIR,
        env={
            **environment,
            "DATABASE_URL": database_url_of(connection.settings_dict),
            "DJANGO_SETTINGS_MODULE": "config.settings",
        },
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_server_process_pools_connections_and_warms_the_model_up_at_startup():
    server = probe("server")
    assert server["pool"] is True
    assert server["pooled_after_close"] >= 1  # closing gave the connection back, still open
    assert server["model_loaded"] is True  # no question was asked
    assert server["vocabulary_built"] is True
    assert server["model_threads"] == 1
    assert server["torch_imported"] is False  # ONNX Runtime and tokenizers only
    assert server["mcp_imported"] is False  # the MCP SDK waits for the first MCP request
    assert server["http_client_imported"] is False  # only a site's or a share's sync needs it
    assert server["environment"] == []  # its defaults do not reach processes it starts
    # A full collection walks only what was made after start-up, a small part of the whole.
    assert server["gc_frozen"] > 10 * server["gc_tracked"]


def test_a_management_process_connects_directly_and_loads_no_model():
    command = probe("command")
    assert command["pool"] is False
    assert command["model_loaded"] is False
    assert command["vocabulary_built"] is False
    assert command["model_threads"] is None
    assert command["gc_frozen"] == 0
