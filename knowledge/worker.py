"""The ingestion worker (django-tasks' database worker) made to outlive a database outage.

`db_worker` exits on the first database error. This worker instead logs it, waits (1 s,
doubling up to 30 s), and polls again once the database answers; a task it was running when
the database went away goes back to the queue (its document's previous version is intact:
ingestion writes each document in one transaction). `bin/serve` restarts a worker that still
dies; a document a dead worker left `processing` is marked failed, readably, by the next
worker to start or to take a task once it has stalled (`documents_fail_interrupted`).
"""

from __future__ import annotations

import logging
import time

from django.db import InterfaceError, OperationalError, connections
from django_tasks_db.compat import TaskResultStatus
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from knowledge.services.lifecycle import documents_fail_interrupted

logger = logging.getLogger(__name__)

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0


class ResilientWorker(Worker):
    def run(self) -> None:
        delay = BACKOFF_FIRST
        while self.running:
            started = time.monotonic()
            try:
                self._requeue_interrupted()
                documents_fail_interrupted()
                super().run()
                return  # batch or max-tasks: done
            except (OperationalError, InterfaceError) as exc:
                if time.monotonic() - started > BACKOFF_MAX:
                    delay = BACKOFF_FIRST  # it had worked for a while: a new outage
                logger.warning(
                    "The database is unavailable (%s); the ingestion worker retries in %.0f s.",
                    " ".join(str(exc).split())[:200],
                    delay,
                )
                connections.close_all()
                time.sleep(delay)  # a stop signal during the wait exits at once
                delay = min(delay * 2, BACKOFF_MAX)

    def run_task(self, db_task_result: DBTaskResult) -> None:
        documents_fail_interrupted()
        super().run_task(db_task_result)

    def _requeue_interrupted(self) -> None:
        """Tasks this worker claimed but could not finish (the database went away under
        them) are queued again."""
        requeued = DBTaskResult.objects.filter(
            status=TaskResultStatus.RUNNING, worker_ids__contains=[self.worker_id]
        ).update(status=TaskResultStatus.READY, started_at=None)
        if requeued:
            logger.warning("Queued again %s task(s) interrupted by the outage.", requeued)
