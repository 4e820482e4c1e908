"""The chat in a real browser: Debian's Chromium driven by Playwright against a live daphne
server on the test database, with a small real knowledge base (two demo documents and one
full of markup). One browser for the module; each test gets fresh, logged-in pages.

Screenshots of the conversation page (light and dark), the sidebar and the document view are
saved under test-artifacts/ on every run.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator

import pytest

from tests.support.browser import (
    ARTIFACTS,
    DEMO,
    IDLE,
    PASSWORD,
    Live,
    animations_ended,
    ask,
    last_answer,
    login,
    screenshot,
    wait_in_view,
    warm_up,
)
from tests.support.live_server import daphne_server, database_url_of

pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("db_reads")]

USERS = ("anna", "ben")
LEAVE_QUESTION = "How many days of annual leave do I get?"
EXPENSES_QUESTION = "How do I claim travel expenses for a hotel and meals?"
UNRELATED_QUESTION = "What is the airspeed velocity of an unladen swallow?"
BADGES_TEXT = (
    "Visitor badges\n\n"
    "Visitor badges are printed at reception <img src=x onerror=alert(3)> every morning "
    "before nine.\n\n"
    "A lost visitor badge must be reported to the security desk <script>alert(4)</script> "
    "within one hour.\n"
)
MARKUP_QUESTION = (
    "Where are visitor badges printed? <img src=x onerror=alert(1)> <script>alert(2)</script>"
)


def _cleanup(sources: list[str]) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.sessions.models import Session
    from django.core.cache import cache

    from knowledge.models import Document

    # Their chats go with them; "root" is the admin test's superuser. Rows this module's tests
    # commit outlive it: under parallel workers the next module of the worker would see them.
    get_user_model().objects.filter(username__in=[*USERS, "root"]).delete()
    Document.objects.filter(source__in=sources).delete()
    Session.objects.all().delete()
    cache.clear()


def _five_sources_conversation(owner) -> str:
    """A stored answer citing five passages (an extractive answer cites at most three)."""
    from chat.models import Conversation
    from knowledge.models import Chunk
    from tests.support.conversations import exchange_create

    chunks = list(
        Chunk.objects.filter(document__source=str((DEMO / "staff-handbook.md").resolve()))
        .select_related("document")
        .order_by("index")[:5]
    )
    assert len(chunks) == 5
    conversation = Conversation.objects.create(owner=owner, title="Everything about the handbook")
    exchange_create(
        conversation,
        question="What does the handbook cover?",
        answer=" ".join(f"Point number {n} of the handbook [{n}]." for n in range(1, 6)),
        cited=chunks,
    )
    return str(conversation.pk)


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Live]:
    """The live server over a small real knowledge base, and two staff users."""
    from django.contrib.auth import get_user_model
    from django.db import connection

    from knowledge.services import document_ingest

    badges = tmp_path_factory.mktemp("kb") / "visitor-badges.txt"
    badges.write_text(BADGES_TEXT)
    files = [DEMO / "staff-handbook.md", DEMO / "expenses-and-travel-policy.pdf", badges]
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
            assert outcome.document is not None and outcome.action != "failed", outcome.error
        show_more = _five_sources_conversation(users["anna"])
    server = daphne_server(
        database_url_of(connection.settings_dict),
        # A short pause between answer pieces makes the streaming visible (and stoppable).
        env={
            "CHAT_STREAM_DELAY_MS": "100",
            "CHAT_RATE_LIMIT": "200/m",
            "CHAT_FLOOD_MIN_INTERVAL": "0",
        },
    )
    try:
        with server as url:
            with django_db_blocker.unblock():
                warm_up(url, users["ben"])
            yield Live(url=url, sources=sources, show_more_conversation=show_more)
    finally:
        with django_db_blocker.unblock():
            _cleanup(sources)


def db(function, *args):
    """Run a database read from a test (the blocker is lifted for the browser tests)."""
    from django.db import connection

    try:
        return function(*args)
    finally:
        connection.close()


def answer_content(message_id: str) -> str:
    from chat.models import Message

    return Message.objects.get(pk=message_id).content


# --- Tests ------------------------------------------------------------------------------------
def test_login_form_leads_to_the_chat(pages):
    page = pages.open(username="", path="/")
    assert "/login/" in page.url  # anonymous visitors are sent to the login page
    login(page, "anna")
    greeting = page.get_by_role(
        "heading", name=re.compile("Good (morning|afternoon|evening), Anna")
    )
    assert greeting.is_visible()
    assert page.locator("#composer-input").is_visible()
    assert page.locator("#send-button").is_disabled()  # nothing to send yet


def test_answer_streams_in_and_cites_the_right_document(pages):
    page = pages.open("anna")
    page.evaluate(
        """() => {
          window.__lengths = [];
          new MutationObserver(() => {
            const body = document.querySelector('#messages [data-status="streaming"] .answer-body');
            if (body) window.__lengths.push(body.textContent.length);
          }).observe(document.getElementById('messages'),
                     {subtree: true, childList: true, characterData: true});
        }"""
    )
    ask(page, LEAVE_QUESTION)
    lengths = [n for n in page.evaluate("window.__lengths") if n > 0]
    assert len(set(lengths)) >= 2, f"the answer should grow in steps, saw {lengths}"
    assert lengths == sorted(lengths)

    answer = last_answer(page)
    assert answer.get_attribute("data-status") == "complete"
    message_id = answer.get_attribute("id")
    streamed = answer.inner_html()
    assert re.search(r"/c/[0-9a-f-]{36}/$", page.url)  # the new chat got its address
    # the footer is one line until opened: the titles are there, not yet shown
    assert "Staff Handbook" in answer.locator("[data-source-title]").first.text_content()
    assert answer.locator(".cite-badge").count() >= 1
    assert "Grounded in" in answer.inner_text()
    sidebar_item = page.locator("#conversation-list a.menu-active")
    assert LEAVE_QUESTION in sidebar_item.inner_text()
    screenshot(page, "conversation.png")
    page.locator("aside").screenshot(path=str(ARTIFACTS / "sidebar.png"))

    # a badge shows the source's title on focus and, clicked, goes to the source
    badge = answer.locator(".cite-badge").first
    badge.focus()
    card = page.locator(f"#{badge.get_attribute('aria-describedby')}")
    assert card.is_visible() and "Staff Handbook" in card.inner_text()
    badge.click()
    target = page.locator(f"#{badge.get_attribute('data-cite')}")
    assert target.locator("summary").evaluate("el => el === document.activeElement")
    screenshot(page, "citation-card.png")

    # a reload restores the message exactly as it streamed, citations included
    page.reload()
    restored = page.locator(f"#{message_id}")
    assert restored.inner_html() == streamed
    assert restored.locator(".cite-badge").count() == answer.locator(".cite-badge").count()


def test_source_opens_the_document_view_at_the_cited_chunk(pages):
    page = pages.open("anna")
    ask(page, EXPENSES_QUESTION)
    title = page.locator("[data-source-title]", has_text="Expenses and Travel Policy")
    last_answer(page).locator("[data-sources-summary]").click()  # the footer opens
    source = last_answer(page).locator("details[data-source]", has=title).first
    source.locator("summary").click()
    source.locator("blockquote").wait_for()  # the full passage unfolds
    link = source.get_by_role("link", name="Open in document")
    chunk_anchor = link.get_attribute("href").split("#")[1]
    original = source.get_by_role("link", name=re.compile("Original file, page \\d+"))
    assert re.search(r"/documents/\d+/file/#page=\d+$", original.get_attribute("href"))
    link.click()
    page.wait_for_url(f"**#{chunk_anchor}")
    cited = page.locator(f"#{chunk_anchor}")
    assert cited.get_attribute("data-highlighted") is not None
    assert "Cited passage" in cited.inner_text()
    wait_in_view(page, chunk_anchor, "document-scroller")  # the page opens at the passage
    screenshot(page, "document.png")


def test_sources_footer_is_one_line_until_opened_then_each_source_with_its_similarity(pages, live):
    page = pages.open("anna", f"/c/{live.show_more_conversation}/")
    answer = last_answer(page)
    line = answer.locator("[data-sources-line]")
    assert line.inner_text() == "Sources: Northwind Analytics Staff Handbook"  # each title once
    assert line.is_visible() and answer.locator("[data-grounded]").is_visible()
    sources = answer.locator("details[data-source]")
    assert sources.count() == 5
    assert not any(sources.nth(i).is_visible() for i in range(5))  # collapsed by default
    summary = answer.locator("[data-sources-summary]")
    assert summary.bounding_box()["height"] < 40  # one line

    summary.click()
    first = sources.first
    assert first.is_visible()
    assert first.locator("[data-source-title]").inner_text() == (
        "Northwind Analytics Staff Handbook"
    )
    similarity = first.locator("[data-source-similarity]").inner_text()
    assert re.fullmatch(r"Similarity 0\.\d\d", similarity)
    excerpt = first.locator("[data-source-excerpt]")
    assert excerpt.is_visible() and len(excerpt.inner_text()) > 20
    summary.click()
    assert not first.is_visible()  # closes again


def test_show_more_sources_and_a_badge_that_scrolls_to_a_hidden_source(pages, live):
    small = {"width": 1280, "height": 640}
    page = pages.open("anna", f"/c/{live.show_more_conversation}/", viewport=small)
    answer = last_answer(page)
    sources = answer.locator("details[data-source]")
    assert sources.count() == 5
    answer.locator("[data-sources-summary]").click()
    assert [sources.nth(i).is_visible() for i in range(5)] == [True, True, True, False, False]
    more = answer.get_by_role("button", name="Show more sources (2)")
    toggle = answer.locator("[data-show-more]")
    more.click()
    assert sources.nth(4).is_visible() and toggle.get_attribute("aria-expanded") == "true"
    answer.get_by_role("button", name="Show fewer sources").click()
    assert not sources.nth(4).is_visible() and toggle.get_attribute("aria-expanded") == "false"

    answer.locator("[data-sources-summary]").click()  # the footer closed again
    assert not sources.first.is_visible()
    answer.locator(".cite-badge").nth(4).click()  # [5]: in the closed footer, "Show more"
    fifth = sources.nth(4)
    assert fifth.is_visible()
    wait_in_view(page, fifth.get_attribute("id"), "scroller")


def test_copy_puts_the_answer_without_markers_on_the_clipboard(pages, live):
    page = pages.open("anna")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live.url)
    ask(page, LEAVE_QUESTION)
    answer = last_answer(page)
    copy = answer.get_by_role("button", name="Copy the answer")
    copy.click()
    copy.get_by_text("Copied").wait_for()
    copied = page.evaluate("navigator.clipboard.readText()")
    content = db(answer_content, answer.get_attribute("id").removeprefix("msg-"))
    assert re.search(r"\[\d+\]", content), "the stored answer has markers"
    assert copied and not re.search(r"\[\d+\]", copied)
    assert copied.split() == re.sub(r"\s*\[\d+\]", "", content).split()

    # thumbs down on the streamed answer is recorded (its buttons came over the socket)
    answer.get_by_role("button", name="Unhelpful answer").click()
    answer.get_by_text("Thanks for the feedback").wait_for()
    pressed = answer.get_by_role("button", name="Unhelpful answer")
    assert pressed.get_attribute("aria-pressed") == "true"


def test_stop_keeps_the_partial_answer_and_regenerate_replaces_it(pages):
    page = pages.open("anna")
    page.locator("#composer-input").fill(EXPENSES_QUESTION)
    page.locator("#composer-input").press("Enter")
    page.wait_for_function(
        """() => {
          const body = document.querySelector('#messages [data-status="streaming"] .answer-body');
          return body && body.textContent.trim().length > 0;
        }"""
    )
    page.get_by_role("button", name="Stop generating").click()
    stopped = page.locator('#messages [data-status="interrupted"]')
    stopped.wait_for()
    page.wait_for_function(IDLE)
    partial = stopped.locator(".answer-body").inner_text()
    assert partial.strip() and "Stopped" in stopped.inner_text()
    assert not page.locator("#stop-button").is_visible()

    old_id = stopped.get_attribute("id")
    stopped.get_by_role("button", name="Regenerate the answer").click()
    page.locator(f"#{old_id}").wait_for(state="detached")
    page.wait_for_function(IDLE, timeout=30_000)
    answers = page.locator('#messages [data-role="assistant"]')
    assert answers.count() == 1
    assert answers.first.get_attribute("data-status") == "complete"
    assert len(answers.first.locator(".answer-body").inner_text()) > len(partial)


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


def test_lost_connection_keeps_the_partial_answer_and_retry_answers_again(pages):
    page = pages.open("ben", path="/login/")
    page.add_init_script(KEEP_SOCKETS)
    page.goto("/")
    page.locator("#composer-input").fill(EXPENSES_QUESTION)
    page.locator("#composer-input").press("Enter")
    page.wait_for_function(
        """() => {
          const body = document.querySelector('#messages [data-status="streaming"] .answer-body');
          return body && body.textContent.trim().length > 0;
        }"""
    )
    page.evaluate("window.__sockets.at(-1).close(4000, 'network gone')")  # the line drops
    # The notice under the answer (a toast says it too, with a Retry of its own).
    alert = page.locator('[role="alert"][data-connection-error]').filter(has_text="Connection lost")
    alert.wait_for()
    partial = page.locator('#messages [data-role="assistant"] .answer-body').last.inner_text()
    assert partial.strip()  # what arrived stays on the page
    page.wait_for_function("() => window.__sockets.at(-1).readyState === 1")  # reconnected
    alert.get_by_role("button", name="Retry").click()
    alert.wait_for(state="detached")
    page.wait_for_function(IDLE, timeout=30_000)
    answers = page.locator('#messages [data-role="assistant"]')
    assert answers.count() == 1 and answers.first.get_attribute("data-status") == "complete"
    assert page.locator('#messages [data-role="user"]').count() == 1


def test_refusal_is_shown_as_such_and_rephrase_refills_the_composer(pages):
    page = pages.open("ben")
    ask(page, UNRELATED_QUESTION)
    refusal = last_answer(page)
    assert refusal.get_attribute("data-status") == "refused"
    assert "No answer in the documents" in refusal.inner_text()
    assert refusal.locator("[data-source]").count() == 0
    assert "Contact support" in refusal.inner_text()
    refusal.get_by_role("button", name="Rephrase your question").click()
    composer = page.locator("#composer-input")
    assert composer.input_value() == UNRELATED_QUESTION
    assert composer.evaluate("el => el === document.activeElement")


def test_composer_keys(pages):
    page = pages.open("ben")
    composer = page.locator("#composer-input")
    send = page.locator("#send-button")
    assert send.is_disabled()
    composer.press_sequentially("first line")
    composer.press("Shift+Enter")
    composer.press_sequentially("second line")
    assert composer.input_value() == "first line\nsecond line"
    assert page.locator('#messages [data-role="user"]').count() == 0  # nothing sent
    assert send.is_enabled()
    composer.press("Escape")
    assert composer.input_value() == "" and send.is_disabled()

    ask(page, LEAVE_QUESTION)  # Enter sends
    assert composer.input_value() == ""
    assert composer.evaluate("el => el === document.activeElement")  # focus is back
    composer.press("ArrowUp")
    assert composer.input_value() == LEAVE_QUESTION  # recalled
    composer.press("ArrowDown")
    assert composer.input_value() == ""  # right after a recall, Down clears
    composer.press("ArrowUp")
    composer.press_sequentially("!")
    composer.press("ArrowDown")  # typing cancels the recall: Down only moves the caret
    assert composer.input_value() == LEAVE_QUESTION + "!"
    composer.press("Escape")
    assert composer.input_value() == ""


def test_a_private_chat_is_invisible_to_another_staff_user(pages):
    anna = pages.open("anna")
    anna.get_by_role("checkbox", name="Private").check()
    question = f"How many days of annual leave do I get? (private {uuid.uuid4().hex[:6]})"
    ask(anna, question)
    url = anna.url
    private_group = anna.locator("#conversation-list ul").nth(1)
    assert question[:40] in private_group.inner_text()

    ben = pages.open("ben")
    assert question[:40] not in ben.locator("#conversation-list").inner_text()
    ben.goto(url)
    assert "does not exist" in ben.locator("main").inner_text()
    assert ben.locator("#composer-input").count() == 0
    ben.goto("/history/?q=private")
    assert question[:40] not in ben.locator("main").inner_text()


def test_markup_in_documents_and_questions_is_shown_as_text_and_never_runs(pages):
    page = pages.open("ben")
    ask(page, MARKUP_QUESTION)
    question = page.locator('#messages [data-role="user"] [data-question]').last
    assert question.inner_text() == MARKUP_QUESTION
    answer = last_answer(page)
    assert answer.get_attribute("data-status") == "complete"
    answer.locator("[data-sources-summary]").click()
    answer.locator("details[data-source] summary").first.click()
    shown = answer.inner_text()
    assert "<img src=x onerror=alert(3)>" in shown  # in the answer and its source, as text
    assert page.locator("#messages img, #messages script").count() == 0

    answer.get_by_role("link", name="Open in document").first.click()
    page.wait_for_url("**/documents/**")
    document = page.locator("main").inner_text()
    assert "<img src=x onerror=alert(3)>" in document and "<script>alert(4)</script>" in document
    assert page.locator("main img, main script").count() == 0
    page.go_back()
    page.wait_for_function(IDLE)
    assert not pages.dialogs


def test_history_search_finds_a_conversation_by_a_word_of_its_answer(pages):
    page = pages.open("ben")
    question = "How many days of annual leave do I get after five years?"
    ask(page, question)
    answer_text = last_answer(page).locator(".answer-body").inner_text()
    words = re.findall(r"[A-Za-z]{7,}", answer_text)
    word = next(w for w in words if w.lower() not in question.lower())
    page.goto("/history/")
    page.get_by_label("Search conversations").fill(word)
    page.get_by_label("Search conversations").press("Enter")
    page.wait_for_url(f"**/history/?q={word}")
    results = page.locator("#history-results")
    assert question in results.inner_text()
    assert word.lower() in results.locator("[data-snippet]").first.inner_text().lower()
    results.get_by_role("link", name=question).click()
    page.wait_for_url("**/c/**")
    assert page.locator('#messages [data-role="assistant"]').count() == 1


def test_settings_dialog_limits_top_k_and_documents(pages):
    page = pages.open("ben")
    page.get_by_role("button", name="Answer settings").click()
    dialog = page.get_by_role("dialog", name="Answer settings")
    dialog.get_by_label("Number of passages (1 to 20)").fill("1")
    dialog.get_by_label("Northwind Analytics Staff Handbook").check()
    dialog.get_by_role("button", name="Done").click()
    assert page.locator("#settings-summary").inner_text() == "Top 1 · 1 document"
    ask(page, EXPENSES_QUESTION)
    answer = last_answer(page)
    titles = answer.locator("[data-source-title]").all_text_contents()
    assert len(titles) <= 1  # top_k 1
    assert all(title == "Northwind Analytics Staff Handbook" for title in titles)


def test_owner_deletes_a_conversation_after_confirming(pages):
    from django.contrib.auth import get_user_model

    from chat.models import Conversation

    ben = get_user_model().objects.get(username="ben")
    doomed = Conversation.objects.create(owner=ben, title="A chat to delete")
    page = pages.open("ben", f"/c/{doomed.pk}/")
    item = page.locator("#conversation-list li", has_text="A chat to delete")
    item.hover()
    item.get_by_role("button", name="Delete conversation: A chat to delete").click()
    dialog = page.get_by_role("dialog", name="Delete this conversation?")
    assert "A chat to delete" in dialog.inner_text()
    dialog.get_by_role("button", name="Cancel").click()
    assert Conversation.objects.filter(pk=doomed.pk).exists()
    item.get_by_role("button", name="Delete conversation: A chat to delete").click()
    dialog.get_by_role("button", name="Delete").click()
    page.wait_for_url(pages.live.url + "/")
    assert not Conversation.objects.filter(pk=doomed.pk).exists()
    assert "A chat to delete" not in page.locator("#conversation-list").inner_text()


def test_dark_theme_follows_the_system(pages, live):
    page = pages.open("anna", f"/c/{live.show_more_conversation}/", color_scheme="dark")
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    light = pages.open("anna", f"/c/{live.show_more_conversation}/", color_scheme="light")
    assert background != light.evaluate("getComputedStyle(document.body).backgroundColor")
    screenshot(page, "conversation-dark.png")
    phone = pages.open("anna", "/", viewport={"width": 390, "height": 844})
    assert not phone.locator("aside").is_visible()  # the sidebar is a drawer on small screens
    phone.get_by_label("Open the conversation list").click()
    phone.locator("aside").wait_for(state="visible")
    animations_ended(phone)  # the drawer slid in
    screenshot(phone, "sidebar-mobile.png")


def test_owner_renames_a_conversation_from_the_header_and_from_the_sidebar(pages):
    from django.contrib.auth import get_user_model

    from chat.models import Conversation

    anna = get_user_model().objects.get(username="anna")
    chat = Conversation.objects.create(owner=anna, title="Hotel question")
    page = pages.open("anna", f"/c/{chat.pk}/")
    page.evaluate("window.__sameDocument = true")
    header = page.locator("#conversation-header")
    item = page.locator(f"#sidebar-{chat.pk}")

    # from the header: the editor opens focused on the title, Enter saves
    header.get_by_role("button", name="Rename conversation").click()
    field = header.get_by_label("Conversation title")
    field.wait_for()
    assert field.evaluate("el => el === document.activeElement")
    assert field.evaluate("el => el.selectionEnd - el.selectionStart") == len("Hotel question")
    field.fill("Hotel caps <b>London</b>")
    field.press("Enter")
    title = header.locator("[data-conversation-title]")
    title.filter(has_text="Hotel caps <b>London</b>").wait_for()
    assert header.get_by_label("Conversation title").count() == 0  # the editor closed
    assert item.locator("[data-sidebar-title]").inner_text() == "Hotel caps <b>London</b>"
    assert page.title() == "Hotel caps <b>London</b> · Sourced"
    focused = header.get_by_role("button", name="Rename conversation")
    assert focused.evaluate("el => el === document.activeElement")  # focus back on the control
    chat.refresh_from_db()
    assert chat.title == "Hotel caps <b>London</b>"

    # from the sidebar: the item turns into the editor; the header follows
    item.hover()
    item.get_by_role("button", name="Rename conversation: Hotel caps <b>London</b>").click()
    field = item.get_by_label("Conversation title")
    field.fill("Hotel caps in London and Paris")
    page.locator("aside").screenshot(path=str(ARTIFACTS / "rename-sidebar.png"))
    item.get_by_role("button", name="Save").click()
    title.filter(has_text="Hotel caps in London and Paris").wait_for()
    assert item.locator("[data-sidebar-title]").inner_text() == "Hotel caps in London and Paris"
    first_shared = page.locator("#conversation-list ul").first.locator("li[id^=sidebar-]").first
    assert first_shared.get_attribute("id") == f"sidebar-{chat.pk}"  # the most recent now
    assert item.locator("a").get_attribute("aria-current") == "page"  # still highlighted
    assert page.title() == "Hotel caps in London and Paris · Sourced"
    assert page.evaluate("window.__sameDocument") is True  # no reload
    screenshot(page, "rename.png")


def test_an_invalid_title_is_explained_and_escape_keeps_the_old_one(pages):
    from django.contrib.auth import get_user_model

    from chat.models import Conversation

    ben = get_user_model().objects.get(username="ben")
    chat = Conversation.objects.create(owner=ben, title="Parking spaces")
    page = pages.open("ben", f"/c/{chat.pk}/")
    header = page.locator("#conversation-header")
    header.get_by_role("button", name="Rename conversation").click()
    field = header.get_by_label("Conversation title")
    field.fill("   ")
    field.press("Enter")
    error = header.get_by_role("alert")
    error.wait_for()
    assert error.inner_text() == "The title is empty."
    field = header.get_by_label("Conversation title")
    assert field.get_attribute("aria-invalid") == "true"
    assert field.get_attribute("aria-describedby") == error.get_attribute("id")
    screenshot(page, "rename-error.png")
    field.press("Escape")
    header.get_by_role("button", name="Rename conversation").wait_for()
    assert header.locator("[data-conversation-title]").inner_text() == "Parking spaces"
    chat.refresh_from_db()
    assert chat.title == "Parking spaces"


def test_someone_elses_shared_conversation_offers_no_rename(pages):
    from django.contrib.auth import get_user_model

    from chat.models import Conversation

    anna = get_user_model().objects.get(username="anna")
    chat = Conversation.objects.create(owner=anna, title="Anna's shared chat")
    page = pages.open("ben", f"/c/{chat.pk}/")
    assert page.locator("[data-read-only]").is_visible()
    header = page.locator("#conversation-header")
    assert header.get_by_role("button", name="Rename conversation").count() == 0
    item = page.locator(f"#sidebar-{chat.pk}")
    item.hover()
    assert item.get_by_role("button").count() == 0  # neither rename nor delete
    assert page.get_by_role("button", name=re.compile("^Rename conversation: Anna")).count() == 0


def test_sidebar_moves_a_conversation_to_the_top_when_it_gets_a_question(pages):
    from django.contrib.auth import get_user_model

    from chat.models import Conversation

    anna = get_user_model().objects.get(username="anna")
    older = Conversation.objects.create(owner=anna, title="Leave, a while ago")
    Conversation.objects.filter(pk=older.pk).update(updated_at="2026-01-01T09:00:00Z")
    page = pages.open("anna", f"/c/{older.pk}/")
    page.evaluate("window.__sameDocument = true")
    shared_items = page.locator("#conversation-list ul").first.locator("li[id^=sidebar-]")
    assert shared_items.first.get_attribute("id") != f"sidebar-{older.pk}"
    ask(page, LEAVE_QUESTION)
    assert shared_items.first.get_attribute("id") == f"sidebar-{older.pk}"
    moved = page.locator(f"#sidebar-{older.pk} a")
    assert moved.get_attribute("aria-current") == "page" and "menu-active" in (
        moved.get_attribute("class")
    )
    # The next question moves just its item up, from wherever the page shows it.
    page.evaluate(
        f"""() => {{
            const item = document.getElementById("sidebar-{older.pk}");
            item.parentElement.appendChild(item);
            item.querySelector("span").textContent = "an old date";
        }}"""
    )
    assert shared_items.first.get_attribute("id") != f"sidebar-{older.pk}"
    ask(page, "And how many days can be carried over?")
    assert shared_items.first.get_attribute("id") == f"sidebar-{older.pk}"
    assert page.locator(f"#sidebar-{older.pk}").count() == 1
    assert "an old date" not in page.locator(f"#sidebar-{older.pk}").inner_text()
    assert moved.get_attribute("aria-current") == "page"
    assert page.evaluate("window.__sameDocument") is True  # no reload


def test_a_new_chat_tops_the_sidebar_and_can_be_renamed_at_once(pages):
    page = pages.open("ben", "/")
    page.get_by_role("checkbox", name="Private").check()
    question = f"How do I claim travel expenses? ({uuid.uuid4().hex[:6]})"
    ask(page, question)
    conversation_id = page.url.rstrip("/").rsplit("/", 1)[1]
    private_items = page.locator("#conversation-list ul").nth(1).locator("li[id^=sidebar-]")
    assert private_items.first.get_attribute("id") == f"sidebar-{conversation_id}"
    assert private_items.first.locator("a").get_attribute("aria-current") == "page"
    header = page.locator("#conversation-header")  # came over the socket with the answer
    header.get_by_role("button", name="Rename conversation").click()
    field = header.get_by_label("Conversation title")
    field.fill("Travel claims")
    field.press("Enter")
    header.locator("[data-conversation-title]", has_text="Travel claims").wait_for()
    assert private_items.first.locator("[data-sidebar-title]").inner_text() == "Travel claims"


def test_the_admin_and_the_api_docs_work_under_the_content_security_policy(pages, live):
    """The header's policy (no inline script) on the admin's own pages: its scripts run (select
    all ticks every row, the filter box filters), and the API docs render; no violation."""
    from django.contrib.auth import get_user_model

    db(
        lambda: (
            get_user_model().objects.filter(username="root").exists()
            or get_user_model().objects.create_superuser(username="root", password=PASSWORD)
        )
    )
    page = pages.open(username="", path="/admin/login/")
    page.get_by_label("Username").fill("root")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/admin/")
    policy = page.request.get(live.url + "/admin/").headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy

    page.goto("/admin/knowledge/document/")
    rows = page.locator("input.action-select")
    assert rows.count() >= 3
    page.locator("#action-toggle").check()
    page.wait_for_function(
        "() => [...document.querySelectorAll('input.action-select')].every(b => b.checked)"
    )
    assert page.locator(".action-counter").inner_text().startswith(f"{rows.count()} of")

    page.goto("/admin/knowledge/document/add/")
    page.get_by_label("Title").fill("Typed under the policy")
    page.goto("/admin/chat/chatsettings/")
    assert page.locator("form").count() >= 1

    page.goto("/api/docs/")
    page.wait_for_selector("#swagger-ui .opblock", timeout=20_000)
    assert page.locator("#swagger-ui .opblock").count() >= 9
