"""The chat's details in a real browser (Debian's Chromium through Playwright, a live daphne
server): the comment box a thumbs down opens, "New chat" disabled on an empty chat, the
`/c/new?q=...` link that opens a private chat and sends its question (from this site or a
listed origin; from another site it waits in the composer), long answers clamped with
"Show more", and the settings dialog's "Show citations", remembered for the user.

The browser and the logged-in pages are tests/ui/conftest.py's; this module brings its own
live server and data (stored directly; the two tests that send a question get an answer from
the real pipeline over a one-document knowledge base)."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import quote_plus

import pytest

from tests.support.browser import IDLE, PASSWORD, Live, screenshot, warm_up
from tests.support.live_server import (
    daphne_server,
    database_url_of,
    free_port,
    server_thread_start,
)

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("db_reads")]

USERS = ("cleo", "dan")
SOURCE = "test:details-browser/leave-policy"
CHUNKS = [
    "Annual leave\n\nEvery employee gets 25 days of annual leave a year, plus public holidays.",
    "Carrying over\n\nUp to five unused days may be carried over into the next leave year.",
]
CITED_ANSWER = "You get 25 days of annual leave a year [1], and up to five days carry over [2]."
LONG_ANSWER = " ".join(
    f"Paragraph {n} of a very long answer about annual leave, its rules and exceptions."
    for n in range(1, 80)
)
LINK_QUESTION = "How many days of annual leave do I get?"
CROSS_SITE_QUESTION = "How many leave days carry over into the next year?"
LISTED_QUESTION = "Do public holidays count as annual leave?"


# Keeps the page's WebSockets in window.__sockets, to see when the chat's socket is open.
KEEP_SOCKETS = """(() => {
  const Native = window.WebSocket;
  window.__sockets = [];
  window.WebSocket = function (...args) {
    const socket = new Native(...args);
    window.__sockets.push(socket);
    return socket;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, {CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3});
})();"""


class LinkSite:
    """Another web site on loopback: its page at `/?q=...` links to the live server's
    `/c/new/?q=...`. Reached as http://127.0.0.1:<port> (listed in the live server's
    QUESTION_LINK_ORIGINS) or as http://localhost:<port> (another site, not listed)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.target = ""  # the live server's URL, once it runs
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 -- http.server's name
                question = self.path.partition("?q=")[2]
                href = f"{site.target}/c/new/?q={question}"
                body = f'<!doctype html><a id="ask" href="{html.escape(href)}">Ask Sourced</a>'
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.end_headers()
                self.wfile.write(body.encode())

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server_thread_start(self.server)

    def page_url(self, host: str, question: str) -> str:
        return f"http://{host}:{self.port}/?q={quote_plus(question)}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def link_site() -> Iterator[LinkSite]:
    site = LinkSite()
    yield site
    site.close()


def _cleanup() -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.models import Session

    from knowledge.models import Document

    get_user_model().objects.filter(username__in=USERS).delete()  # their chats go with them
    Document.objects.filter(source=SOURCE).delete()
    Session.objects.all().delete()


class DetailsLive(Live):
    cited: str = ""
    long: str = ""


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, link_site) -> Iterator[DetailsLive]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from chat.models import Conversation
    from tests.support.conversations import exchange_create
    from tests.support.knowledge_base import document_create

    with django_db_blocker.unblock():
        _cleanup()
        users = {
            name: get_user_model().objects.create_user(
                username=name, password=PASSWORD, is_staff=True, first_name=name.title()
            )
            for name in USERS
        }
        document = document_create(title="Leave policy", texts=CHUNKS, source=SOURCE)
        cited = Conversation.objects.create(owner=users["cleo"], title="Leave, cited")
        exchange_create(
            cited,
            question="How much leave?",
            answer=CITED_ANSWER,
            cited=list(document.chunks.order_by("index")),
        )
        long = Conversation.objects.create(owner=users["cleo"], title="A long answer")
        exchange_create(long, question="Tell me everything.", answer=LONG_ANSWER)
        exchange_create(long, question="And briefly?", answer="25 days.")
    server = daphne_server(
        database_url_of(connection.settings_dict),
        env={
            "CHAT_RATE_LIMIT": "200/m",
            "CHAT_FLOOD_MIN_INTERVAL": "0",
            "QUESTION_LINK_ORIGINS": f"http://127.0.0.1:{link_site.port}",
        },
    )
    try:
        with server as url:
            link_site.target = url
            with django_db_blocker.unblock():
                warm_up(url, users["dan"])
            live = DetailsLive(url=url, sources=[], show_more_conversation=str(cited.pk))
            live.cited, live.long = str(cited.pk), str(long.pk)
            yield live
    finally:
        with django_db_blocker.unblock():
            _cleanup()


def db(function, *args):
    """Run a database read from a test (the blocker is lifted for the browser tests)."""
    from django.db import connection

    try:
        return function(*args)
    finally:
        connection.close()


# --- Tests ------------------------------------------------------------------------------------
def test_thumbs_down_opens_a_comment_box_whose_comment_is_stored(pages, live):
    from chat.models import Feedback

    page = pages.open("cleo", f"/c/{live.cited}/")
    answer = page.locator('#messages [data-role="assistant"]').last
    answer.get_by_role("button", name="Unhelpful answer").click()
    box = answer.get_by_label("What was wrong with this answer? (optional)")
    box.wait_for()
    assert box.evaluate("(el) => el === document.activeElement")  # ready to type
    box.fill("It forgot the public holidays.")
    screenshot(page, "feedback-comment.png")
    answer.get_by_role("button", name="Send").click()
    box.wait_for(state="detached")  # the box closes
    assert answer.get_by_text("Thanks for the feedback").is_visible()
    assert answer.get_by_role("button", name="Unhelpful answer").get_attribute("aria-pressed") == (
        "true"
    )
    feedback = db(
        lambda: Feedback.objects.get(user__username="cleo", message__conversation=live.cited)
    )
    assert (feedback.rating, feedback.comment) == (-1, "It forgot the public holidays.")

    # thumbs up opens no box
    answer.get_by_role("button", name="Helpful answer", exact=True).click()
    answer.get_by_role("button", name="Helpful answer", exact=True, pressed=True).wait_for()
    assert answer.locator("[data-feedback-comment]").count() == 0


def test_new_chat_is_disabled_until_the_chat_has_a_question(pages, live):
    page = pages.open("dan", "/")
    new_chat = page.get_by_role("link", name="New chat")
    assert new_chat.get_attribute("aria-disabled") == "true"
    new_chat.click(force=True)  # does nothing
    page.wait_for_timeout(300)
    assert page.url.rstrip("/") == live.url
    page.locator("#composer-input").fill("What is a leave year?")
    page.locator("#composer-input").press("Enter")
    page.wait_for_function(
        "() => !document.getElementById('new-chat-button').hasAttribute('aria-disabled')"
    )
    assert new_chat.get_attribute("href") == "/"
    page.wait_for_function(IDLE, timeout=60_000)
    new_chat.click()
    page.wait_for_url(f"{live.url}/")
    assert page.get_by_role("link", name="New chat").get_attribute("aria-disabled") == "true"

    opened = pages.open("cleo", f"/c/{live.cited}/")  # a chat with messages
    assert opened.get_by_role("link", name="New chat").get_attribute("aria-disabled") is None


def test_a_question_link_opens_a_chat_and_the_page_sends_it(pages, live):
    from chat.models import Conversation, Message

    page = pages.open("dan", "/c/new/?q=" + LINK_QUESTION.replace(" ", "+"))
    question = page.locator('#messages [data-role="user"]')
    question.first.wait_for(timeout=30_000)
    assert question.first.inner_text() == LINK_QUESTION
    page.wait_for_url(re.compile(r"/c/[0-9a-f-]{36}/$"))  # the new conversation's own address
    page.wait_for_function(IDLE, timeout=60_000)
    assert page.locator("#composer-input").input_value() == ""
    conversation_id = page.url.rstrip("/").rsplit("/", 1)[1]

    def questions() -> list[str]:
        return list(
            Message.objects.filter(conversation_id=conversation_id, role="user").values_list(
                "content", flat=True
            )
        )

    assert db(questions) == [LINK_QUESTION]
    assert db(lambda: Conversation.objects.get(pk=conversation_id).is_private)
    page.reload()  # the conversation's address: nothing is sent again
    page.wait_for_timeout(1000)
    assert question.count() == 1 and db(questions) == [LINK_QUESTION]


def stored(question: str) -> list[tuple[str, bool]]:
    """(conversation id, private) of each message asking `question`."""
    from chat.models import Message

    return [
        (str(conversation_id), private)
        for conversation_id, private in Message.objects.filter(
            role="user", content=question
        ).values_list("conversation_id", "conversation__is_private")
    ]


def test_a_question_link_followed_from_another_site_waits_in_the_composer(pages, live, link_site):
    page = pages.open("dan", link_site.page_url("localhost", CROSS_SITE_QUESTION))
    page.add_init_script(KEEP_SOCKETS)
    page.locator("#ask").click()
    page.wait_for_url(re.compile(r"/c/new/\?q="))
    page.wait_for_function("() => (window.__sockets || []).some((s) => s.readyState === 1)")
    page.wait_for_timeout(1500)  # the socket is open: an autosend would have gone by now

    assert page.locator("#composer-input").input_value() == CROSS_SITE_QUESTION
    assert page.locator('#messages [data-role="user"]').count() == 0
    assert "was not sent" in page.locator("[data-link-notice]").inner_text()
    assert page.locator('input[name="is_private"]').is_checked()
    assert db(stored, CROSS_SITE_QUESTION) == []

    page.locator("#composer-input").press("Enter")  # the person sends it: private
    page.wait_for_url(re.compile(r"/c/[0-9a-f-]{36}/$"))
    page.wait_for_function(IDLE, timeout=60_000)
    conversation_id = page.url.rstrip("/").rsplit("/", 1)[1]
    assert db(stored, CROSS_SITE_QUESTION) == [(conversation_id, True)]


def test_a_question_link_followed_from_a_listed_origin_sends_itself_privately(
    pages, live, link_site
):
    page = pages.open("dan", link_site.page_url("127.0.0.1", LISTED_QUESTION))
    page.locator("#ask").click()
    page.wait_for_url(re.compile(r"/c/[0-9a-f-]{36}/$"), timeout=30_000)
    page.wait_for_function(IDLE, timeout=60_000)
    conversation_id = page.url.rstrip("/").rsplit("/", 1)[1]
    assert db(stored, LISTED_QUESTION) == [(conversation_id, True)]


def test_a_long_answer_is_clamped_with_show_more(pages, live):
    page = pages.open("cleo", f"/c/{live.long}/")
    answers = page.locator('#messages [data-role="assistant"]')
    long, short = answers.nth(0), answers.nth(1)
    body = long.locator(".answer-body")
    more = long.get_by_role("button", name="Show more")
    more.wait_for()
    assert more.get_attribute("aria-expanded") == "false"
    clamped = body.evaluate("(el) => [el.clientHeight, el.scrollHeight]")
    assert clamped[0] < clamped[1] and clamped[0] <= 400
    assert short.get_by_role("button", name="Show more").count() == 0
    screenshot(page, "long-answer-clamped.png")
    more.click()
    less = long.get_by_role("button", name="Show less")
    assert less.get_attribute("aria-expanded") == "true"
    shown = body.evaluate("(el) => [el.clientHeight, el.scrollHeight]")
    assert shown[0] == shown[1] > clamped[0]
    less.click()
    assert long.get_by_role("button", name="Show more").is_visible()


def test_show_citations_hides_the_markers_and_is_remembered_for_the_user(pages, live):
    from accounts.models import Preferences

    page = pages.open("cleo", f"/c/{live.cited}/")
    markers = page.locator("#messages .cite-badge")
    assert markers.count() == 2 and markers.first.is_visible()
    page.get_by_role("button", name="Answer settings").click()
    dialog = page.get_by_role("dialog", name="Answer settings")
    toggle = dialog.get_by_label("Show citations")
    assert toggle.is_checked()
    with page.expect_response("**/account/preferences/") as stored:
        toggle.uncheck()
    assert stored.value.status == 204
    assert not markers.first.is_visible()
    dialog.get_by_role("button", name="Done").click()
    assert db(lambda: Preferences.objects.get(user__username="cleo").show_citations) is False

    elsewhere = pages.open("cleo", f"/c/{live.cited}/")  # another browser of the same user
    assert not elsewhere.locator("#messages .cite-badge").first.is_visible()
    assert elsewhere.locator("[data-source]").count() == 2  # the sources stay
    other_user = pages.open("dan", "/")
    assert other_user.locator("#chat").get_attribute("data-show-citations") == "true"

    elsewhere.get_by_role("button", name="Answer settings").click()
    with elsewhere.expect_response("**/account/preferences/"):
        elsewhere.get_by_label("Show citations").check()
    assert elsewhere.locator("#messages .cite-badge").first.is_visible()
    assert db(lambda: Preferences.objects.get(user__username="cleo").show_citations) is True


def test_the_conversation_list_drawer_opens_and_closes_from_the_keyboard(pages, live):
    page = pages.open("cleo", "/", viewport={"width": 390, "height": 844})
    aside = page.locator("aside")
    assert not aside.is_visible()
    opener = page.get_by_role("button", name="Open the conversation list")
    opener.focus()
    page.keyboard.press("Enter")
    aside.wait_for(state="visible")
    page.keyboard.press("Escape")
    aside.wait_for(state="hidden")
    assert opener.evaluate("(el) => el === document.activeElement")
