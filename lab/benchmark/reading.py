"""Answering while personal files are being read
(docs/decisions/0084-reading-files-does-not-starve-answering.md): the same first-event
measurement of other users' questions, over the WebSocket, without and then with `files`
PDFs of `pages` pages being read by a real ingestion worker (`manage.py ingest_worker`, a
process of its own, with the environment's INGEST_WORKER_NICE), in turns. The files are
uploaded as a user's personal files in the throwaway database and purged at the end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile

from knowledge.models import Document
from lab.benchmark.personal_files import pdf_of

STARTED_TIMEOUT = 600.0  # the worker (niced) loads its model before it reads the first file


@dataclass
class Reading:
    """Files queued for the worker: how many are still unread."""

    file_ids: list[int]

    def unread(self) -> int:
        return Document.objects.filter(
            pk__in=self.file_ids,
            status__in=[Document.Status.PENDING, Document.Status.PROCESSING],
        ).count()


@contextmanager
def files_being_read(*, database_url: str, files: int, pages: int) -> Iterator[Reading]:
    """`files` new PDFs of `pages` pages uploaded as a throwaway user's personal files and a
    worker process reading them (after a small file, read first, for which it loads its model);
    yields once that small file is ready. The
    worker is stopped and the files purged (bytes included) when the block ends."""
    from knowledge.personal import personal_file_purge, personal_file_upload

    user = get_user_model().objects.create_user(
        username=f"bench-reader-{uuid.uuid4().hex[:8]}", is_staff=True
    )
    # A small file first: the worker has loaded its model once it is ready.
    warm_up = personal_file_upload(
        owner=user, upload=SimpleUploadedFile("warm-up.md", b"# Warm-up\n\nA first file.\n")
    )
    documents = [
        personal_file_upload(
            owner=user,
            upload=SimpleUploadedFile(
                f"file-{n}.pdf", pdf_of(pages, salt=f"{uuid.uuid4().hex[:10]}")
            ),
        )
        for n in range(files)
    ]
    reading = Reading(file_ids=[d.pk for d in documents])
    everything = [warm_up.pk, *reading.file_ids]
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url,
        "TASKS_BACKEND": "django_tasks_db.DatabaseBackend",
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "PYTHONUNBUFFERED": "1",
    }
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "ingest_worker", "--interval", "0.2"],
        cwd=settings.BASE_DIR,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + STARTED_TIMEOUT
        while Document.objects.get(pk=warm_up.pk).status != Document.Status.READY:
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("The ingestion worker did not start reading the files.")
            time.sleep(0.2)
        yield reading
    finally:
        worker_stop(worker)
        for document in Document.objects.filter(pk__in=everything):
            personal_file_purge(document)
        user.delete()


def worker_stop(worker: subprocess.Popen) -> None:
    """Stop the ingestion worker without waiting for the file it is reading: a first TERM
    stops an idle worker at once, but one in the middle of a file finishes the file first
    (db_worker's graceful stop: about 15 s a round on a busy machine, measured, read at low
    priority); a second TERM, a second later, stops the file too (db_worker's forced stop).
    KILL if it is still there 20 s after."""
    worker.terminate()
    try:
        worker.wait(timeout=1)
        return
    except subprocess.TimeoutExpired:
        worker.terminate()
    try:
        worker.wait(timeout=20)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
