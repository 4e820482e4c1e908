"""`manage.py ingest_worker`: django-tasks' `db_worker` that survives database outages."""

from __future__ import annotations

import logging
import os
import threading

from django.conf import settings
from django.core.management.base import CommandError
from django_tasks_db.management.commands.db_worker import Command as DbWorkerCommand

from knowledge.embedding import embedding_warm_up
from knowledge.worker import ResilientWorker

logger = logging.getLogger(__name__)

# How long a worker that is leaving waits for the model's warm-up to finish (it takes about 14 s
# on a busy 2-core machine: docs/decisions/0004-embedding-onnx-runtime-and-batching.md).
WARM_UP_JOIN_SECONDS = 60.0


class Command(DbWorkerCommand):
    help = (
        "Run the background ingestion worker (django-tasks' database worker, same options). "
        "A database outage makes it wait and retry with backoff instead of exiting; tasks it "
        "was running then are queued again. It runs at a lower CPU priority "
        "(INGEST_WORKER_NICE) than the web processes."
    )

    def handle(
        self,
        *,
        verbosity: int,
        queue_name: str,
        interval: float,
        batch: bool,
        backend_name: str,
        startup_delay: bool,
        max_tasks: int | None,
        worker_id: str,
        exclude_queues: str,
        **options,
    ) -> None:
        self.configure_logging(verbosity)
        if not 0 <= settings.INGEST_WORKER_NICE <= 19:
            raise CommandError("INGEST_WORKER_NICE must be between 0 and 19.")
        if settings.INGEST_WORKER_NICE:
            # Reading documents yields the CPU to the web processes answering questions
            # (docs/decisions/0084-reading-files-does-not-starve-answering.md).
            os.nice(settings.INGEST_WORKER_NICE)
        queue_names = queue_name.split(",")
        excluded = exclude_queues.split(",") if exclude_queues else []
        if excluded and "*" not in queue_names:
            raise CommandError("--exclude-queues can only be used with --queue-name=*")
        warming = None
        if not batch:
            # The model is loaded while the worker waits for its first task, not by that task
            # (a user's first file would wait for it); the model lock makes a task that comes
            # first wait for this load instead of loading it again.
            warming = threading.Thread(target=_warm_up, name="embedding-warm-up", daemon=True)
            warming.start()
        worker = ResilientWorker(
            queue_names=queue_names,
            interval=interval,
            batch=batch,
            backend_name=backend_name,
            startup_delay=startup_delay,
            max_tasks=max_tasks,
            worker_id=worker_id,
            excluded_queue_names=excluded,
        )
        worker.configure_signals()  # no autoreload: a worker restarted mid-task loses it
        try:
            worker.run()
        finally:
            if warming is not None:
                # Leaving while the load runs in the model's native code (the worker failing
                # at once, or stopped at once) would abort the process ("terminate called
                # without an active exception", exit status 134) instead of exiting with its
                # error: the load is waited for, WARM_UP_JOIN_SECONDS at most.
                warming.join(timeout=WARM_UP_JOIN_SECONDS)


def _warm_up() -> None:
    try:
        embedding_warm_up()
    except Exception:  # the first task loads it again and reports the error on its document
        logger.exception("Warming up the embedding model failed")
