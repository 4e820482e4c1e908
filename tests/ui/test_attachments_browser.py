"""Attaching a file in a real browser (docs/decisions/0081-personal-files.md,
docs/decisions/0082-personal-file-progress-over-the-socket.md): the paperclip uploads it, its
chip shows its progress until it is ready — sent by the conversation's socket, never polled —,
the question asked then is answered from it with a citation to "your file · offer.md", and the
chip's × removes it; a question sent while a file is still being read waits for it, visibly,
and is then answered from it.

The browser and the logged-in pages are tests/ui/conftest.py's; this module brings its own
live server and ingestion worker (`manage.py ingest_worker`, another process, as in
production) and its own user."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import IDLE, PASSWORD, Live, screenshot
from tests.support.live_server import daphne_server, database_url_of, ingest_worker

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("db_reads")]

USER = "pia"
OFFER = (
    "# Offer letter\n\nThe Zanzibarine signing bonus of 7,250 pounds is paid after the "
    "probation period of six months.\n"
)


def _cleanup() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.models import Session

    get_user_model().objects.filter(username=USER).delete()  # their files and conversations
    Session.objects.all().delete()


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Live]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from tests.support.knowledge_base import document_create

    with django_db_blocker.unblock():
        _cleanup()
        get_user_model().objects.create_user(
            username=USER, password=PASSWORD, is_staff=True, first_name="Pia"
        )
        document_create(
            title="Keepers (attachments browser test)",
            texts=["Keepers wind the lens clockwork every four hours."],
            source="test:attachments-browser/keepers",
        )
    database_url = database_url_of(connection.settings_dict)
    env = {
        "TASKS_BACKEND": "django_tasks_db.DatabaseBackend",
        "MEDIA_ROOT": str(tmp_path_factory.mktemp("media")),
    }
    try:
        with ingest_worker(database_url, env=env), daphne_server(database_url, env=env) as url:
            yield Live(url=url, sources=[], show_more_conversation="")
    finally:
        with django_db_blocker.unblock():
            from knowledge.models import Document

            _cleanup()
            Document.objects.filter(source="test:attachments-browser/keepers").delete()


def record_file_polls(page) -> list[str]:
    """The `GET /api/files/<id>` requests the page makes from now on (none expected)."""
    polls: list[str] = []
    page.on(
        "request",
        lambda request: (
            polls.append(request.url)
            if request.method == "GET" and "/api/files/" in request.url
            else None
        ),
    )
    return polls


def test_attach_see_progress_and_get_an_answer_citing_your_file(pages, live, tmp_path):
    offer = tmp_path / "offer.md"
    offer.write_text(OFFER)
    page = pages.open(USER, "/")
    polls = record_file_polls(page)

    page.set_input_files("#attach-input", str(offer))
    chip = page.locator("#attachments [data-file-id]")
    chip.wait_for()
    assert chip.locator("[data-file-name]").inner_text() == "offer.md"
    page.locator('#attachments [data-file-status="ready"]').wait_for(timeout=60_000)
    assert chip.locator("[data-file-state]").inner_text() == "ready"
    assert polls == []  # the chip's progress came over the socket

    page.fill("#composer-input", "How much is the Zanzibarine signing bonus?")
    page.press("#composer-input", "Enter")
    # The page is idle before the question leaves too: wait for the answer's bubble first.
    page.locator('#messages [data-role="assistant"]').wait_for(timeout=60_000)
    page.wait_for_function(IDLE, timeout=90_000)
    answer = page.locator('#messages [data-role="assistant"]').last
    assert "7,250" in answer.inner_text()
    assert "your file · offer.md" in page.content()
    screenshot(page, "attachment-answer.png")

    page.locator("#attachments [data-file-remove]").click()
    assert page.locator("#attachments [data-file-id]").count() == 0


def test_a_question_sent_while_its_file_is_read_waits_for_it_then_is_answered_from_it(
    pages, live, tmp_path
):
    from lab.benchmark.personal_files import pdf_of

    # Twenty pages of new text: seconds of reading, far longer than typing the question.
    contract = tmp_path / "contract.pdf"
    contract.write_bytes(pdf_of(20, salt="waiting"))
    page = pages.open(USER, "/")
    polls = record_file_polls(page)

    page.set_input_files("#attach-input", str(contract))
    page.fill("#composer-input", "What is the notice period once the probation has ended?")
    page.press("#composer-input", "Enter")

    notice = page.locator("#attachments-waiting")
    notice.wait_for()
    assert "Waiting for your files to be read" in notice.inner_text()
    page.locator('#attachments [data-file-status="reading"]').wait_for()
    assert notice.is_visible()  # the file is being read and the question waits
    assert page.locator('#messages [data-role="user"]').count() == 0

    page.locator('#attachments [data-file-status="ready"]').wait_for(timeout=120_000)
    page.locator('#messages [data-role="assistant"]').wait_for(timeout=60_000)
    page.wait_for_function(IDLE, timeout=90_000)
    assert page.locator("#attachments-waiting").count() == 0
    answer = page.locator('#messages [data-role="assistant"]').last
    assert "three months" in answer.inner_text()
    assert "your file · contract.pdf" in page.content()
    assert polls == []
    screenshot(page, "attachment-waited-answer.png")
