"""Accessibility: axe-core, run inside Debian's Chromium, finds no violation on the app's pages
(the chat's, the document view, the admin's insights), in light and in dark mode.

axe-core is vendored in tests/ui/vendor/ (axe.min.js from the npm package, with its licence)
and injected into each page with Playwright's `add_script_tag`: nothing is downloaded at test
time. To check another page, add one line to PAGES: its name, its path (``{conversation}`` and
``{document}`` are filled in with this module's stored conversation and document), who opens
it (ANONYMOUS, STAFF, or ADMIN: a superuser), and what to do in the page before the check
(``None``, or a function of the page).

The browser and the logged-in pages are tests/ui/conftest.py's; this module brings its own
live server and data (stored directly: no question is asked)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.browser import PASSWORD, Live, animations_ended, screenshot
from tests.support.live_server import daphne_server, database_url_of

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("db_reads")]

AXE = Path(__file__).parent / "vendor" / "axe.min.js"
STAFF = "ada"
ADMIN = "ada-admin"
ANONYMOUS = ""
SOURCE = "test:accessibility/leave-policy"
QUESTION = "How many days of annual leave do I get?"
CHUNKS = [
    "Annual leave\n\nEvery employee gets 25 days of annual leave a year, plus public holidays.",
    "Carrying over\n\nUp to five unused days may be carried over into the next leave year.",
]
ANSWER = "You get 25 days of annual leave a year [1], and up to five days carry over [2]."


def _settings_open(page) -> None:
    page.get_by_role("button", name="Answer settings").click()
    page.locator("#settings-dialog [data-document-options] input").first.wait_for()


def _drawer_open(page) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.get_by_label("Open the conversation list").click()
    page.locator("aside").wait_for(state="visible")


# (name, path, who, action before the check): one line per page.
PAGES: list[tuple[str, str, str, Callable | None] | object] = [
    ("login", "/login/", ANONYMOUS, None),
    ("home", "/", STAFF, None),
    ("conversation", "/c/{conversation}/", STAFF, None),
    ("history", "/history/", STAFF, None),
    ("document", "/documents/{document}/", STAFF, None),
    ("settings", "/", STAFF, _settings_open),
    ("sidebar-drawer", "/", STAFF, _drawer_open),
    ("insights", "/admin/insights/", ADMIN, None),
]
SCHEMES = ["light", "dark"]


def _cleanup() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.models import Session

    from knowledge.models import Document

    get_user_model().objects.filter(username__in=[STAFF, ADMIN]).delete()  # and their chats
    Document.objects.filter(source=SOURCE).delete()
    Session.objects.all().delete()


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker) -> Iterator[Live]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from chat.models import Conversation
    from tests.support.conversations import exchange_create
    from tests.support.knowledge_base import basis, document_create

    with django_db_blocker.unblock():
        _cleanup()
        user = get_user_model().objects.create_user(
            username=STAFF, password=PASSWORD, is_staff=True, first_name="Ada"
        )
        get_user_model().objects.create_superuser(username=ADMIN, password=PASSWORD)
        document = document_create(
            title="Leave policy",
            texts=CHUNKS,
            vectors=[basis(0), basis(1)],
            source=SOURCE,
        )
        conversation = Conversation.objects.create(owner=user, title=QUESTION)
        exchange_create(
            conversation, question=QUESTION, answer=ANSWER, cited=list(document.chunks.all())
        )
    server = daphne_server(database_url_of(connection.settings_dict))
    try:
        with server as url:
            live = Live(url=url, sources=[], show_more_conversation=str(conversation.pk))
            live.document_id = document.pk
            yield live
    finally:
        with django_db_blocker.unblock():
            _cleanup()


def axe_violations(page) -> list[dict]:
    """The violations axe-core finds in the page as it is now (every rule axe runs by
    default, best practices included): id, impact, help and the first nodes' selectors."""
    page.add_script_tag(path=str(AXE))
    return page.evaluate(
        """async () => {
          const results = await axe.run(document, {resultTypes: ['violations']});
          return results.violations.map((v) => ({
            id: v.id, impact: v.impact, help: v.help,
            nodes: v.nodes.slice(0, 5).map((n) => n.target.join(' ') + ' :: ' + n.failureSummary),
            count: v.nodes.length,
          }));
        }"""
    )


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize(
    ("name", "path", "who", "action"),
    PAGES,
    ids=[(getattr(p, "values", None) or p)[0] for p in PAGES],
)
def test_axe_finds_no_violation(pages, live, name, path, who, action, scheme):
    address = path.format(conversation=live.show_more_conversation, document=live.document_id)
    # The page's Content-Security-Policy would refuse the injected axe-core: bypassed here only.
    page = pages.open(who, address, color_scheme=scheme, bypass_csp=True)
    pages.settled(page)
    if action:
        action(page)
    animations_ended(page)  # the drawer, the dialog
    violations = axe_violations(page)
    if violations:
        screenshot(page, f"axe-{name}-{scheme}.png", full_page=True)
    report = [
        f"{v['id']} ({v['impact']}, {v['count']} nodes): {v['help']}\n    "
        + "\n    ".join(v["nodes"])
        for v in violations
    ]
    assert violations == [], "\n".join(report)
