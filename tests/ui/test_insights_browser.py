"""The insights page (/admin/insights/) in Debian's Chromium: a month of exchanges drawn as
charts with their numbers on hover and in the table, in the light and the dark theme and on a
narrow screen, with no Content-Security-Policy violation (tests/ui/conftest.py's `pages`
records them). The screenshots go to test-artifacts/ (docs/images/insights*.png are copies).

This module brings its own live server and data (stored directly: no question is asked)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import PASSWORD, Live, screenshot
from tests.support.live_server import daphne_server, database_url_of

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("db_reads")]

ADMIN = "ines"
STAFF = ("maya", "omar", "lena", "theo")
SOURCE_PREFIX = "test:insights-browser/"
TITLES = ["Staff handbook", "Expenses policy", "Security policy", "Travel guide", "Old rota"]


def _cleanup() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.models import Session

    from knowledge.models import Document

    get_user_model().objects.filter(username__in=(ADMIN, *STAFF)).delete()
    Document.objects.filter(source__startswith=SOURCE_PREFIX).delete()
    Session.objects.all().delete()


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker) -> Iterator[Live]:
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.utils import timezone

    from tests.support.insights import insights_month
    from tests.support.knowledge_base import document_create

    with django_db_blocker.unblock():
        _cleanup()
        users = get_user_model().objects
        users.create_superuser(username=ADMIN, email="", password=PASSWORD)
        staff = [users.create_user(username=name, is_staff=True) for name in STAFF]
        documents = [
            document_create(
                title=title, texts=[f"{title}: a passage."], source=f"{SOURCE_PREFIX}{title}"
            )
            for title in TITLES
        ]
        insights_month(users=staff, documents=documents[:4], last=timezone.localdate())
    server = daphne_server(database_url_of(connection.settings_dict))
    try:
        with server as url:
            yield Live(url=url, sources=[], show_more_conversation="")
    finally:
        with django_db_blocker.unblock():
            _cleanup()


def _luminance(page, selector: str, prop: str) -> float:
    """The relative brightness (0..1) of a computed colour of the first element matching."""
    return page.evaluate(
        """([selector, prop]) => {
          const value = getComputedStyle(document.querySelector(selector))[prop];
          const [r, g, b] = value.match(/[\\d.]+/g).map(Number);
          return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
        }""",
        [selector, prop],
    )


def test_the_insights_page_draws_the_month_with_its_numbers(pages, live):
    page = pages.open(ADMIN, "/admin/insights/", viewport={"width": 1280, "height": 900})

    questions = page.locator("#chart-questions")
    assert questions.is_visible()
    bars = questions.locator("rect")
    assert bars.count() > 30  # answered and refused for each of 30 days, at least
    hover = bars.first.locator("title").text_content()
    assert " · Answered: " in hover or " · Refused: " in hover
    assert page.locator("#chart-refusals .reference").count() == 1  # the 20% line
    assert page.locator("#chart-latency circle").count() > 30
    # The table beside the charts holds each day's numbers.
    assert page.locator("#insights-per-bucket tbody tr").count() == 30
    total = page.locator('[data-figure="questions"] strong').inner_text()
    per_day = page.locator("#insights-per-bucket tbody tr td:nth-child(2)").all_inner_texts()
    assert int(total) == sum(int(value) for value in per_day) > 0
    documents = page.locator("#insights-documents tbody th").all_inner_texts()
    assert documents[0] == "Staff handbook"  # the most cited
    assert "Old rota" in page.locator("#insights-not-cited").inner_text()
    unanswered = page.locator("#insights-unanswered").inner_text()
    assert "car park" in unanswered or "gym" in unanswered
    # Light theme: dark text on a light page.
    assert _luminance(page, "body", "backgroundColor") > 0.8
    assert _luminance(page, "#chart-questions .axis", "fill") < 0.6

    page.hover("#chart-questions rect >> nth=0")
    screenshot(page, "insights.png", full_page=True)

    # The export, streamed by daphne (an async iterator under ASGI), one row per question.
    export = page.request.get(page.locator("a.insights-export").get_attribute("href"))
    assert export.ok
    assert export.headers["content-type"] == "text/csv; charset=utf-8"
    lines = export.text().strip().splitlines()
    assert lines[0].startswith("time,user,conversation,visibility,mode,outcome,")
    assert len(lines) - 1 == int(total)

    page.get_by_role("link", name="Last 7 days").click()
    page.wait_for_url("**/admin/insights/?days=7")
    assert page.locator("#insights-per-bucket tbody tr").count() == 7


def test_the_insights_page_in_the_dark_theme(pages, live):
    page = pages.open(
        ADMIN, "/admin/insights/", viewport={"width": 1280, "height": 900}, color_scheme="dark"
    )

    assert page.locator("#chart-questions rect").count() > 30
    assert _luminance(page, "body", "backgroundColor") < 0.2
    assert _luminance(page, "#chart-questions .axis", "fill") > 0.6  # readable on dark
    assert _luminance(page, "#chart-questions rect.series-answered", "fill") > 0.4
    screenshot(page, "insights-dark.png", full_page=True)


def test_the_insights_page_fits_a_narrow_screen(pages, live):
    page = pages.open(ADMIN, "/admin/insights/", viewport={"width": 390, "height": 844})

    chart = page.locator("#chart-questions").bounding_box()
    assert chart["x"] >= 0 and chart["x"] + chart["width"] <= 390
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert page.locator("#insights-per-bucket").count() == 1
    screenshot(page, "insights-narrow.png", full_page=True)
