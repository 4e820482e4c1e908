"""Background work of the chat app, run by the django-tasks worker."""

from __future__ import annotations

import logging

from django.conf import settings
from django_tasks import task

logger = logging.getLogger(__name__)


@task()
def evidence_calibrate_task() -> str:
    """Measure the knowledge base for the evidence check (chat/calibration.py) when it changed
    since the stored calibration; returns "updated", "unchanged" or "empty"."""
    from chat.calibration import calibration_current, calibration_refresh

    before = calibration_current()
    row = calibration_refresh()
    if row is None:
        return "empty"
    unchanged = before is not None and before.fingerprint == row.fingerprint
    return "unchanged" if unchanged else "updated"


def evidence_calibration_schedule(**_kwargs) -> None:
    """Queue a recalibration once the current transaction commits, unless one is already
    waiting (a batch of uploads queues one, not one per document)."""
    from django.db import transaction

    transaction.on_commit(_enqueue)


def _enqueue() -> None:
    from django_tasks_db.compat import TaskResultStatus
    from django_tasks_db.models import DBTaskResult

    path = f"{evidence_calibrate_task.func.__module__}.{evidence_calibrate_task.func.__name__}"
    try:
        if "django_tasks_db" in settings.TASKS["default"]["BACKEND"]:
            waiting = DBTaskResult.objects.filter(task_path=path, status=TaskResultStatus.READY)
            if waiting.exists():
                return
        evidence_calibrate_task.enqueue()
    except Exception:  # the change that triggered it must not fail for this
        logger.exception("Could not queue the evidence calibration")
