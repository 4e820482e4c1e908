"""A withheld answer in a real browser (docs/decisions/0080-withheld-answers.md): a shared
conversation whose answer cites an HR-only document, opened in Debian's Chromium by a member
of HR (the answer, its hover card and sources) and by staff outside HR (the question, the
notice, and the restricted text nowhere in the page's HTML).

The browser and the logged-in pages are tests/ui/conftest.py's; this module brings its own
live server and data (stored directly: no question is asked)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import PASSWORD, Live, screenshot
from tests.support.live_server import daphne_server, database_url_of

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("db_reads")]

USERS = ("hana", "ben")
GROUP = "HR (browser test)"
COLLECTION = "HR only (browser test)"
QUESTION = "What is the salary band for a Grade 7 analyst?"
RESTRICTED_CHUNK = "The Quetzal band for Grade 7 analysts runs from 41,000 to 48,000 pounds."
RESTRICTED_ANSWER = "Grade 7 analysts are paid on the Quetzal band, 41,000 to 48,000 pounds. [1]"
SECRET = "Quetzal"
SOURCE = "test:withheld-browser/pay-bands"


def _cleanup() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.contrib.sessions.models import Session

    from knowledge.models import Collection, Document

    get_user_model().objects.filter(username__in=USERS).delete()  # their conversations too
    Document.objects.filter(source=SOURCE).delete()
    Collection.objects.filter(name=COLLECTION).delete()
    Group.objects.filter(name=GROUP).delete()
    Session.objects.all().delete()


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker) -> Iterator[Live]:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.db import connection

    from chat.models import Conversation
    from knowledge.collections import collection_create
    from tests.support.conversations import exchange_create
    from tests.support.knowledge_base import basis, document_create

    with django_db_blocker.unblock():
        _cleanup()
        users = {
            name: get_user_model().objects.create_user(
                username=name, password=PASSWORD, is_staff=True, first_name=name.title()
            )
            for name in USERS
        }
        hr = Group.objects.create(name=GROUP)
        users["hana"].groups.add(hr)
        document = document_create(
            title="Pay bands",
            texts=[RESTRICTED_CHUNK],
            vectors=[basis(0)],
            source=SOURCE,
            collection=collection_create(name=COLLECTION, groups=[hr]),
        )
        conversation = Conversation.objects.create(owner=users["hana"], title=QUESTION)
        exchange_create(
            conversation, question=QUESTION, answer=RESTRICTED_ANSWER, cited=[document.chunks.get()]
        )
    server = daphne_server(database_url_of(connection.settings_dict))
    try:
        with server as url:
            yield Live(url=url, sources=[], show_more_conversation=str(conversation.pk))
    finally:
        with django_db_blocker.unblock():
            _cleanup()


def test_a_withheld_answer_shows_the_notice_and_its_question_and_nothing_of_its_text(pages, live):
    path = f"/c/{live.show_more_conversation}/"

    reader = pages.open("hana", path)
    answer = reader.locator('#messages [data-role="assistant"]')
    assert SECRET in answer.locator(".answer-body").inner_text()
    badge = answer.locator(".cite-badge").first
    badge.focus()
    assert (
        RESTRICTED_CHUNK
        in reader.locator(f"#{badge.get_attribute('aria-describedby')}").inner_text()
    )

    outsider = pages.open("ben", path)
    answer = outsider.locator('#messages [data-role="assistant"]')
    notice = answer.locator("[data-withheld-notice]")
    assert notice.is_visible()
    assert notice.inner_text() == "This answer draws on documents you don't have access to."
    assert outsider.locator('#messages [data-role="user"]').inner_text() == QUESTION
    assert answer.locator(".cite-badge, [data-copy], [data-source]").count() == 0
    html = outsider.content()
    assert SECRET not in html and "41,000" not in html and "Pay bands" not in html
    screenshot(outsider, "withheld-answer.png")
