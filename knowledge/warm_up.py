"""A server process's warm-up: the embedding model, then the knowledge base's vocabulary, then
what start-up left behind set aside from the cyclic garbage collector, in a background thread
(config/asgi.py starts it)."""

from __future__ import annotations

import gc
import logging
import threading

from django.conf import settings
from django.db import connection

from knowledge.access import reader_of_all_staff
from knowledge.embedding import embedding_warm_up
from knowledge.vocabulary import vocabulary_get

_warm_up_started = threading.Event()
logger = logging.getLogger(__name__)


def startup_objects_freeze() -> None:
    """Collect the garbage there is, then move every object the cyclic garbage collector tracks
    to its permanent generation (`gc.freeze`): the modules, the model's session and the
    vocabulary a server process holds for its whole life are no longer walked by each full
    collection, which otherwise stops every question in flight while it walks them.

    Frozen objects are still freed when nothing refers to them; only a reference cycle among
    them is never collected. Objects made later are collected as before. Why, with the pauses
    measured: docs/decisions/0180-start-up-objects-frozen.md."""
    gc.collect()
    gc.freeze()


def embedding_warm_up_start() -> None:
    """`embedding_warm_up`, then the knowledge base's vocabulary, then `startup_objects_freeze`,
    in a background thread, once per process, when settings.EMBEDDING_WARM_UP is on
    (config/asgi.py turns it on in server processes). Requests are served meanwhile; a question
    that comes first waits for the model being loaded (the load holds the model lock) instead of
    loading it a second time."""
    if not settings.EMBEDDING_WARM_UP or _warm_up_started.is_set():
        return
    _warm_up_started.set()

    def run() -> None:
        try:
            embedding_warm_up()
        except Exception:  # the first question loads it again and reports the error
            logger.exception("Warming up the embedding model failed")
        # Retrieval weighs a question's terms by the vocabulary of what the asker may read,
        # built on a process's first search for that scope (seconds at 100k chunks): build now
        # the one most staff share, of the collections readable by all staff.
        try:
            vocabulary_get(reader=reader_of_all_staff())
        except Exception:  # e.g. not migrated yet: the first question builds it
            logger.exception("Building the knowledge base's vocabulary failed")
        finally:
            connection.close()
        startup_objects_freeze()

    threading.Thread(target=run, name="embedding-warm-up", daemon=True).start()
