"""A question about a cell in a real browser: Debian's Chromium through Playwright against a
live daphne server whose knowledge base holds a real workbook (and the staff handbook). The
answer quotes the row, the source and its hover card read "inventory.xlsx — Stocks!A4:E4",
and the document view shows the sheet as a table with the cited row highlighted and in view.

The browser and the logged-in pages are tests/ui/conftest.py's, the page helpers
tests/support/browser.py's; this module brings its own live server and knowledge base."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import (
    DEMO,
    PASSWORD,
    Live,
    ask,
    last_answer,
    screenshot,
    wait_in_view,
    warm_up,
)
from tests.support.live_server import daphne_server, database_url_of
from tests.support.spreadsheets import SAFETY_QUESTION, inventory_xlsx

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("db_reads")]

USERS = ("anna", "ben")
HEADING = "inventory.xlsx — Stocks!A4:E4"


def _cleanup(sources: list[str]) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.models import Session

    from knowledge.models import Document

    get_user_model().objects.filter(username__in=USERS).delete()
    Document.objects.filter(source__in=sources).delete()
    Session.objects.all().delete()


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Live]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from knowledge.services import document_ingest

    folder = tmp_path_factory.mktemp("sheets")
    files = [inventory_xlsx(folder / "inventory.xlsx"), DEMO / "staff-handbook.md"]
    sources = [str(path.resolve()) for path in files]
    with django_db_blocker.unblock():
        _cleanup(sources)
        users = {
            name: get_user_model().objects.create_user(
                username=name, password=PASSWORD, is_staff=True, first_name=name.title()
            )
            for name in USERS
        }
        for path in files:
            outcome = document_ingest(path=path)
            assert outcome.action != "failed", outcome.error
    server = daphne_server(
        database_url_of(connection.settings_dict),
        env={
            "CHAT_STREAM_DELAY_MS": "20",
            "CHAT_RATE_LIMIT": "200/m",
            "CHAT_FLOOD_MIN_INTERVAL": "0",
        },
    )
    try:
        with server as url:
            with django_db_blocker.unblock():
                warm_up(url, users["ben"])
            yield Live(url=url, sources=sources, show_more_conversation="")
    finally:
        with django_db_blocker.unblock():
            _cleanup(sources)


def test_a_cell_question_is_cited_down_to_the_cells_and_shown_in_the_sheet(pages):  # noqa: F811
    page = pages.open("anna")
    ask(page, SAFETY_QUESTION)

    answer = last_answer(page)
    assert answer.get_attribute("data-status") == "complete"
    body = answer.locator(".answer-body").inner_text()
    assert "QX-2207" in body and "Safety stock: 200" in body and "QX-2208" not in body
    source = answer.locator("details[data-source]").first
    assert source.locator("[data-source-title]").text_content() == HEADING

    badge = answer.locator(".cite-badge").first
    badge.focus()
    card = page.locator(f"#{badge.get_attribute('aria-describedby')}")
    assert card.is_visible() and HEADING in card.inner_text()
    assert "QX-2207" in card.inner_text() and "QX-2208" not in card.inner_text()  # its row
    screenshot(page, "spreadsheet-answer.png")
    badge.blur()  # the card closes again

    answer.locator("[data-sources-summary]").click()
    source.locator("summary").click()
    link = source.get_by_role("link", name="Open in document")
    assert "cells=A4%3AE4" in link.get_attribute("href")
    anchor = link.get_attribute("href").split("#")[1]
    link.click()
    page.wait_for_url(f"**#{anchor}")

    sheet = page.locator('section[data-sheet="Stocks"]')
    headers = sheet.locator("thead th").all_inner_texts()
    assert headers[1:] == [
        "Product code",
        "Product name",
        "Quantity in stock",
        "Safety stock",
        "Last delivery",
    ]
    highlighted = page.locator("tr[data-highlighted]")
    assert highlighted.count() == 1  # the quoted row, not its whole chunk (rows 4-6)
    row = highlighted.first
    assert row.get_attribute("data-row") == "4" and row.get_attribute("id") == anchor
    cells = row.locator("td").all_inner_texts()
    assert cells == ["QX-2207", "Brass valve 1/2in", "150", "200", "15 March 2026"]
    assert sheet.locator('tr[data-row="5"]').get_attribute("data-highlighted") is None
    assert page.locator('section[data-sheet="Archive"] [data-hidden-sheet]').is_visible()
    wait_in_view(page, anchor, "document-scroller")
    screenshot(page, "spreadsheet-document.png")
