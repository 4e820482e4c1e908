"""An answer from weak evidence in a real browser (`docs/product.md §4`): the notice is visible
above the answer, announced as a note, and the citation's hover card says it too; an answer
from strong evidence has neither.

The browser and the logged-in pages are tests/ui/conftest.py's; this module brings its own
live server and data (stored directly: no question is asked)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import PASSWORD, Live, screenshot
from tests.support.live_server import daphne_server, database_url_of

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("db_reads")]

USER = "wendy"
SOURCE = "test:weak-evidence-browser/leave"
CHUNK = "Full-time employees receive 25 days of paid annual leave per calendar year."
WEAK_QUESTION = "Can I take leave in another company's office?"
STRONG_QUESTION = "How many days of annual leave do I get?"


def _cleanup() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.models import Session

    from knowledge.models import Document

    get_user_model().objects.filter(username=USER).delete()  # their conversations too
    Document.objects.filter(source=SOURCE).delete()
    Session.objects.all().delete()


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker) -> Iterator[Live]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from chat.models import Conversation, Message
    from tests.support.conversations import exchange_create
    from tests.support.knowledge_base import basis, document_create

    with django_db_blocker.unblock():
        _cleanup()
        user = get_user_model().objects.create_user(
            username=USER, password=PASSWORD, is_staff=True, first_name="Wendy"
        )
        document = document_create(
            title="Staff handbook", texts=[CHUNK], vectors=[basis(0)], source=SOURCE
        )
        conversation = Conversation.objects.create(owner=user, title=WEAK_QUESTION)
        for question, evidence in (
            (WEAK_QUESTION, Message.Evidence.WEAK),
            (STRONG_QUESTION, Message.Evidence.STRONG),
        ):
            _, answer = exchange_create(
                conversation,
                question=question,
                answer=f"{CHUNK} [1]",
                cited=[document.chunks.get()],
            )
            Message.objects.filter(pk=answer.pk).update(evidence=evidence)
    server = daphne_server(database_url_of(connection.settings_dict))
    try:
        with server as url:
            yield Live(url=url, sources=[], show_more_conversation=str(conversation.pk))
    finally:
        with django_db_blocker.unblock():
            _cleanup()


def test_a_weak_answer_shows_the_notice_above_it_and_on_its_hover_card(pages, live):
    from chat.answering.evidence import WEAK_EVIDENCE_CARD, WEAK_EVIDENCE_NOTICE

    page = pages.open(USER, f"/c/{live.show_more_conversation}/")
    weak, strong = page.locator('#messages [data-role="assistant"]').all()

    notice = weak.get_by_role("note")
    assert notice.is_visible() and notice.inner_text().strip() == WEAK_EVIDENCE_NOTICE
    body = weak.locator(".answer-body")
    assert notice.bounding_box()["y"] < body.bounding_box()["y"]
    badge = weak.locator(".cite-badge").first
    badge.hover()
    card = page.locator(f"#{badge.get_attribute('aria-describedby')}")
    assert card.is_visible() and WEAK_EVIDENCE_CARD in card.inner_text()
    screenshot(page, "weak-evidence-answer.png")

    assert strong.get_by_role("note").count() == 0
    strong_badge = strong.locator(".cite-badge").first
    strong_card = page.locator(f"#{strong_badge.get_attribute('aria-describedby')}")
    assert WEAK_EVIDENCE_CARD not in strong_card.inner_text()
