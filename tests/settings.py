"""The settings the test suite runs with: the project's own (`config.settings`), with a fast
password hasher, one embedding thread per process in a pytest-xdist worker, and database
connections kept open between requests and thread hops.

Django's default hasher (PBKDF2, a million iterations) is built to be slow; the suite creates
about 750 users and signs in hundreds of times, so it would spend minutes hashing. MD5 is
fine for throwaway test passwords and never used outside the tests. The servers the tests
start (daphne, the ingestion worker: `tests.support.live_server`) are given these settings
too, so a password set by a test is checked by the same hasher."""

import os

from config.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# In a pytest-xdist worker (`make test`), the model embeds on one thread, as in the servers
# (config/asgi.py): three workers and their servers share two cores, and ONNX Runtime's pool
# threads, spinning for work between calls, cost CPU the other workers need
# (docs/decisions/0170-the-suite-in-parallel-workers.md). It is set in the environment, so
# that the processes the tests start with the product's own settings (`config.settings`: the
# ingestion worker, `sync`, `ingest`) embed on one thread too. EMBEDDING_THREADS already in the
# environment still wins.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("EMBEDDING_THREADS", "1")
    EMBEDDING_THREADS = int(os.environ["EMBEDDING_THREADS"])

# Connections stay open between the requests and thread hops of a test process, as the
# servers' pool keeps them (config/asgi.py), instead of a new PostgreSQL backend for every
# `database_sync_to_async` call of an in-process answer: about 6 ms of CPU each, 1 of it the
# test's and 5 PostgreSQL's (docs/decisions/0170-the-suite-in-parallel-workers.md, twelfth
# round). A pooled process (DB_POOL) keeps its own.
if not DB_POOL:  # noqa: F405
    DATABASES["default"]["CONN_MAX_AGE"] = None  # noqa: F405
