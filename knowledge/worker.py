"""The ingestion worker (django-tasks' database worker) made to outlive a database outage.

`db_worker` exits on the first database error. This worker instead logs it, waits (1 s,
doubling up to 30 s), and polls again once the database answers; a task it was running when
the database went away goes back to the queue (its document's previous version is intact:
ingestion writes each document in one transaction). `bin/serve` restarts a worker that still
dies; a document a dead worker left `processing` is marked failed, readably, by the next
worker to start or to take a task once it has stalled (`documents_fail_interrupted`).

It also re-scans the sources (folders, sites, WebDAV shares): at start and then every
`SYNC_POLL_SECONDS` (on a thread of its own), the sources whose re-scan is due are claimed
and a re-scan task is queued for each, which this or another worker then runs like any task
(docs/decisions/0116-watched-folders-scheduled-by-the-worker.md). With `--batch`, the sources
due at start are re-scanned before the worker exits.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import DatabaseError, InterfaceError, OperationalError, connections, transaction
from django_tasks_db.compat import TaskResultStatus
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from knowledge.services.lifecycle import documents_fail_interrupted
from knowledge.sources.services import sources_claim_due
from knowledge.tasks import source_sync_task

logger = logging.getLogger(__name__)

BACKOFF_FIRST = 1.0
BACKOFF_MAX = 30.0


class ResilientWorker(Worker):
    def run(self) -> None:
        delay = BACKOFF_FIRST
        if not self.batch:
            threading.Thread(target=self._sources_poll, name="sources", daemon=True).start()
        while self.running:
            started = time.monotonic()
            try:
                self._requeue_interrupted()
                self._sources_enqueue()
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

    def _sources_enqueue(self) -> None:
        """Claim the sources due for a re-scan and queue a re-scan task for each, in one
        transaction: a source is never claimed without its task."""
        with transaction.atomic():
            queued = sources_claim_due()
            for source_id in queued:
                source_sync_task.enqueue(source_id)
        if queued:
            logger.info("Queued the re-scan of %s source(s).", len(queued))

    def _sources_poll(self) -> None:
        """Every SYNC_POLL_SECONDS while the worker runs: queue the re-scans that are due. Any
        failure is logged and the next poll tries again."""
        while self.running:
            time.sleep(settings.SYNC_POLL_SECONDS)
            try:
                self._sources_enqueue()
            except DatabaseError as exc:
                logger.warning(
                    "Could not look for sources to re-scan (%s); trying again in %s s.",
                    " ".join(str(exc).split())[:200],
                    settings.SYNC_POLL_SECONDS,
                )
            except Exception:  # the poll must outlive anything; logged in full
                logger.exception("Looking for sources to re-scan failed")
            finally:
                connections.close_all()  # this thread's connections only
