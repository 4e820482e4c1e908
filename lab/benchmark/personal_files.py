"""How long a personal file takes to be ready to answer (docs/decisions/0081-personal-files.md):
a PDF of `pages` pages of prose is uploaded as a user's file and read by the worker's task, in
this process; the seconds from upload to ready are returned. Run inside a throwaway database
(it creates a user and deletes it with the file).

`.venv/bin/python -m lab.benchmark.personal_files [RUNS] [PAGES]` (default 3 runs of 20 pages)
prints each run's seconds and chunks with the load average, in a throwaway database, the model
loaded first as the worker loads it at its start."""

from __future__ import annotations

import os
import sys
import time
import uuid

from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile

SENTENCES = [
    "The signing bonus is paid in two instalments after the probation period.",
    "Annual leave accrues at two and a half days for each complete month of service.",
    "The notice period for either party is three months once the probation has ended.",
    "Relocation costs are reimbursed against receipts up to the agreed ceiling.",
    "Overtime is compensated with time off in lieu within the following quarter.",
]


def pdf_of(pages: int, salt: str = "") -> bytes:
    """A PDF of `pages` pages, each a heading and about 400 words; `salt` in every sentence
    makes its text new (nothing to reuse from an earlier run)."""
    from fpdf import FPDF

    pdf = FPDF()
    for number in range(1, pages + 1):
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 14)
        pdf.cell(0, 10, f"Section {number}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        for paragraph in range(6):
            text = " ".join(
                f"{SENTENCES[(number + paragraph + i) % len(SENTENCES)]} ({salt} clause "
                f"{number}.{i})"
                for i in range(5)
            )
            pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def personal_file_ready_seconds(pages: int = 20) -> tuple[float, int]:
    """(seconds from upload to ready, chunks) for a `pages`-page PDF personal file of new
    text (every chunk embedded)."""
    from knowledge.personal import personal_file_process_task, personal_file_upload

    user = get_user_model().objects.create_user(
        username=f"bench-{uuid.uuid4().hex[:8]}", is_staff=True
    )
    try:
        data = pdf_of(pages, salt=uuid.uuid4().hex[:10])
        started = time.perf_counter()
        document = personal_file_upload(owner=user, upload=SimpleUploadedFile("offer.pdf", data))
        personal_file_process_task.call(document.pk)
        seconds = time.perf_counter() - started
        document.refresh_from_db()
        if document.status != document.Status.READY:
            raise RuntimeError(f"the file was not read: {document.error}")
        return seconds, document.chunks.count()
    finally:
        user.delete()


def main(arguments: list[str]) -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from knowledge import embedding
    from lab.benchmark.stats import load_average
    from lab.evaluation.isolated import isolated_database

    runs = int(arguments[0]) if arguments else 3
    pages = int(arguments[1]) if len(arguments) > 1 else 20
    embedding.embed_texts(["warm up"])  # the worker loads its model when it starts
    with isolated_database("sourced_personal_files"):
        for run in range(1, runs + 1):
            load = load_average()
            seconds, chunks = personal_file_ready_seconds(pages)
            print(
                f"run {run}: {pages} pages, {chunks} chunks, ready in {seconds:.1f} s "
                f"(load average {load} → {load_average()})",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
