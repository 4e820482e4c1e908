"""Attaching a file in a real browser (docs/decisions/0081-personal-files.md): the paperclip
uploads it, its chip shows its progress until it is ready, the question asked then is answered
from it with a citation to "your file · offer.md", and the chip's × removes it.

The browser and the logged-in pages are tests/ui/conftest.py's; this module brings its own
live server, whose tasks run at once (no worker process), and its own user."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import IDLE, PASSWORD, Live, screenshot
from tests.support.live_server import daphne_server, database_url_of

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
    env = {
        "TASKS_BACKEND": "django_tasks.backends.immediate.ImmediateBackend",
        "MEDIA_ROOT": str(tmp_path_factory.mktemp("media")),
    }
    server = daphne_server(database_url_of(connection.settings_dict), env=env)
    try:
        with server as url:
            yield Live(url=url, sources=[], show_more_conversation="")
    finally:
        with django_db_blocker.unblock():
            from knowledge.models import Document

            _cleanup()
            Document.objects.filter(source="test:attachments-browser/keepers").delete()


def test_attach_see_progress_and_get_an_answer_citing_your_file(pages, live, tmp_path):
    offer = tmp_path / "offer.md"
    offer.write_text(OFFER)
    page = pages.open(USER, "/")

    page.set_input_files("#attach-input", str(offer))
    chip = page.locator("#attachments [data-file-id]")
    chip.wait_for()
    assert chip.locator("[data-file-name]").inner_text() == "offer.md"
    page.locator('#attachments [data-file-status="ready"]').wait_for(timeout=60_000)
    assert chip.locator("[data-file-state]").inner_text() == "ready"

    page.fill("#composer-input", "How much is the Zanzibarine signing bonus?")
    page.press("#composer-input", "Enter")
    page.wait_for_function(IDLE, timeout=90_000)
    answer = page.locator('#messages [data-role="assistant"]').last
    assert "7,250" in answer.inner_text()
    assert "your file · offer.md" in page.content()
    screenshot(page, "attachment-answer.png")

    page.locator("#attachments [data-file-remove]").click()
    assert page.locator("#attachments [data-file-id]").count() == 0
