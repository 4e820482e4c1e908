"""Hostile content in the real browser (docs/product.md §8, sanitised text): an XSS corpus placed in
ingested documents of every format (PDF, DOCX, HTML, Markdown, TXT, XLSX, CSV, PPTX), in
questions, a conversation title, a feedback comment and a language model's Markdown reply,
rendered by Debian's Chromium through every page and fragment (the streamed WebSocket
fragments, the Sources block, the document view with its highlighted passage, the history,
the sidebar) and the admin (changelists and change pages of documents, chunks, conversations,
messages and feedback).

Nothing may execute: every page gets a trap before its own scripts (`__hit()`, which every
vector calls, and alert/confirm/prompt record into `window.__xss`), dialogs and script errors
are recorded, and the DOM is searched for an injected element or handler (an `on*`/`hx-*`
attribute, a URL attribute or a script/iframe/object carrying the corpus, a javascript:/data:
link). And the hostile text is shown as text: what the parser kept of each document is on its
page, and the question, title and comment read as typed. The figures (vectors x surfaces) are
printed."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from io import BytesIO
from pathlib import Path

import pytest

from tests.support.live_server import daphne_server, database_url_of

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# Each vector calls __hit(<its name>) if it ever runs.
VECTORS = {
    "script": "<script>__hit('script')</script>",
    "img-onerror": "<img src=x onerror=__hit('img')>",
    "svg-onload": "<svg onload=__hit('svg')><circle r=9></circle></svg>",
    "javascript-url": "<a href=\"javascript:__hit('jsurl')\">open the form</a>",
    "data-url": "<iframe src=\"data:text/html,<script>parent.__hit('data')</script>\"></iframe>",
    "attribute-breakout": "\"'><b onmouseover=__hit('attr') autofocus onfocus=__hit('focus')>x</b>",
    "broken-markup": "</div></textarea></title><script>__hit('broken')</script><!--",
    "details-ontoggle": "<details open ontoggle=__hit('toggle')><summary>s</summary></details>",
    "htmx-attributes": '<div hx-get="/logout/" hx-trigger="load" hx-on::load="__hit(\'hx\')">',
    "markdown-link": "[click me](javascript:__hit('mdlink'))",
    "markdown-image": "![pic](x\" onerror=\"__hit('mdimg'))",
    "markdown-autolink": "<javascript:__hit('autolink')>",
}
LITERAL_MARKER = "the Zephyr gateway code is printed in footnote [2] of the annex"
TOPIC = "Zephyr gateway"
QUESTION = "What does the Zephyr gateway rule say about the gateway code?"
PASSWORD = "xss-pass-2026"

TRAP = """
window.__xss = [];
window.__hit = (name) => window.__xss.push(String(name));
for (const name of ['alert', 'confirm', 'prompt']) {
  window[name] = (...args) => { window.__xss.push(name + ':' + args.join(' ')); };
}
"""
INJECTED = """() => {
  // An element or handler the corpus put there: an event handler or htmx attribute, a
  // resource (src, srcdoc, object data) or script/frame carrying it, a javascript:/data: link.
  // (A link whose query string holds the corpus, like a search's sort links, is no threat.)
  const found = [];
  const resources = ['src', 'srcdoc', 'data', 'xlink:href'];
  const scheme = /^\\s*(javascript|data|vbscript):/i;
  for (const el of document.querySelectorAll('*')) {
    for (const attr of el.attributes) {
      const name = attr.name.toLowerCase();
      if (['href', 'action', 'formaction', 'xlink:href'].includes(name)
          && scheme.test(attr.value)) found.push(`${el.tagName} ${name}=${attr.value}`);
      if (!attr.value.includes('__hit')) continue;
      if (name.startsWith('on') || name.startsWith('hx-') || name.startsWith('data-hx')
          || resources.includes(name)) found.push(`${el.tagName} ${name}`);
    }
    if (['SCRIPT', 'IFRAME', 'OBJECT', 'EMBED', 'FRAME'].includes(el.tagName)
        && (el.textContent.includes('__hit') || (el.getAttribute('src') || '').includes('__hit')))
      found.push(el.tagName);
  }
  return found;
}"""
IDLE = """() => {
  const state = document.getElementById('chat-state');
  return state && state.dataset.busy === 'false'
    && !document.querySelector('#messages [data-status="streaming"]');
}"""


def corpus_lines() -> list[str]:
    """One line per vector, each a sentence about the Zephyr gateway (so a question finds
    them), and the literal "[2]" that must never become a citation badge."""
    lines = [f"Zephyr gateway rule {n}: {vector} applies." for n, vector in
             enumerate(VECTORS.values(), start=1)]  # fmt: skip
    return [f"The Zephyr gateway rule: {LITERAL_MARKER}.", *lines]


def squash(text: str) -> str:
    return " ".join(text.split())


# --- Documents of every format ----------------------------------------------------------------
def write_documents(folder: Path) -> dict[str, Path]:
    import csv

    import docx
    from fpdf import FPDF
    from openpyxl import Workbook
    from pptx import Presentation

    lines = corpus_lines()
    files = {}
    pdf = FPDF()
    pdf.set_title("Zephyr PDF")
    pdf.add_page()
    pdf.set_font("Helvetica", size=10)
    for line in lines:
        pdf.multi_cell(0, 5, line, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(2)
    files["pdf"] = folder / "zephyr.pdf"
    files["pdf"].write_bytes(bytes(pdf.output()))

    document = docx.Document()
    document.add_heading("Zephyr DOCX <script>__hit('heading')</script>", level=1)
    for line in lines:
        document.add_paragraph(line)
    buffer = BytesIO()
    document.save(buffer)
    files["docx"] = folder / "zephyr.docx"
    files["docx"].write_bytes(buffer.getvalue())

    # HTML: the live tags are the parser's to drop; the same text as entities must survive.
    from html import escape

    body = "".join(f"<p>{escape(line)}</p>" for line in lines)
    live_tags = "".join(VECTORS.values())
    files["html"] = folder / "zephyr.html"
    files["html"].write_text(
        f"<html><head><title>Zephyr HTML</title></head><body><h1>Zephyr HTML</h1>"
        f"{live_tags}{body}</body></html>"
    )
    files["md"] = folder / "zephyr.md"
    files["md"].write_text("# Zephyr Markdown\n\n" + "\n\n".join(lines) + "\n")
    files["txt"] = folder / "zephyr.txt"
    files["txt"].write_text("Zephyr text\n\n" + "\n\n".join(lines) + "\n")

    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Rules <b>"
    sheet.append(["Rule", "Zephyr gateway text"])
    for n, line in enumerate(lines, start=1):
        sheet.append([f"Z-{n}", line])
    files["xlsx"] = folder / "zephyr.xlsx"
    workbook.save(files["xlsx"])
    files["csv"] = folder / "zephyr.csv"
    with files["csv"].open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["Rule", "Zephyr gateway text"])
        writer.writerows([f"Z-{n}", line] for n, line in enumerate(lines, start=1))

    deck = Presentation()
    for start in range(0, len(lines), 4):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Zephyr slide <svg onload=__hit('slide{start}')>"
        slide.placeholders[1].text_frame.text = "\n".join(lines[start : start + 4])
    files["pptx"] = folder / "zephyr.pptx"
    deck.save(files["pptx"])
    return files


@dataclass
class Live:
    url: str
    documents: dict[str, int]  # format → document id
    llm: object
    checked: dict[str, int] = field(default_factory=dict)  # surface → vectors checked


@pytest.fixture(scope="module")
def live(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Live]:
    from django.contrib.auth import get_user_model
    from django.db import connection

    from knowledge.services import document_ingest
    from tests.support.openai_server import openai_server

    folder = tmp_path_factory.mktemp("xss")
    with django_db_blocker.unblock():
        users = get_user_model().objects
        users.filter(username__in=["mallory", "victor"]).delete()
        users.create_superuser(username="mallory", password=PASSWORD)
        users.create_user(username="victor", password=PASSWORD, is_staff=True)
        documents = {}
        for kind, path in write_documents(folder).items():
            outcome = document_ingest(path=path)
            assert outcome.document is not None and outcome.action != "failed", outcome.error
            documents[kind] = outcome.document.pk
        connection.close()
    with (
        openai_server() as llm,
        daphne_server(
            database_url_of(connection.settings_dict),
            env={
                "CHAT_STREAM_DELAY_MS": "0",
                "CHAT_RATE_LIMIT": "200/m",
                "CHAT_FLOOD_MIN_INTERVAL": "0",
                "LLM_BACKEND": "openai",
                "LLM_BASE_URL": llm.base_url,
                "LLM_MODEL": "hostile-test-model",
            },
        ) as url,
    ):
        yield Live(url=url, documents=documents, llm=llm)
    with django_db_blocker.unblock():
        from knowledge.models import Document

        Document.objects.filter(pk__in=documents.values()).delete()
        users.filter(username__in=["mallory", "victor"]).delete()
        connection.close()


class Visitor:
    """A logged-in browser context with the trap installed in every page."""

    def __init__(self, browser, live: Live, username: str) -> None:
        self.live = live
        self.context = browser.new_context(base_url=live.url)
        self.context.add_init_script(TRAP)
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page = self.context.new_page()
        self.page.on("dialog", self._dialog)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.goto("/login/")
        self.page.get_by_label("Username").fill(username)
        self.page.get_by_label("Password").fill(PASSWORD)
        self.page.get_by_role("button", name="Log in").click()
        self.page.wait_for_url("**/")

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, path: str) -> str:
        response = self.page.goto(path)
        assert response is not None and response.status == 200, (path, response and response.status)
        return self.check(path)

    def check(self, where: str) -> str:
        """Nothing ran, nothing was injected; the page's text, whitespace squashed."""
        page = self.page
        page.wait_for_load_state("load")
        page.wait_for_timeout(150)  # let any injected handler (onload, autofocus, load) fire
        page.hover("body")
        assert page.evaluate("window.__xss") == [], where
        assert page.evaluate(INJECTED) == [], where
        assert self.dialogs == [] and self.errors == [], (where, self.dialogs, self.errors)
        return squash(page.inner_text("body"))

    def close(self) -> None:
        self.context.close()


def count(live: Live, surface: str, vectors: int = len(VECTORS)) -> None:
    live.checked[surface] = live.checked.get(surface, 0) + vectors


@pytest.fixture(autouse=True)
def _db_reads(django_db_blocker):
    with django_db_blocker.unblock():
        yield


def chunks_of(document_id: int) -> list:
    from django.db import connection

    from knowledge.models import Chunk

    try:
        return list(Chunk.objects.filter(document_id=document_id).order_by("index"))
    finally:
        connection.close()


# --- Tests ------------------------------------------------------------------------------------
def test_document_pages_of_every_format_show_the_corpus_as_text(browser, live):
    visitor = Visitor(browser, live, "victor")
    try:
        for kind, document_id in live.documents.items():
            chunks = chunks_of(document_id)
            stored = " ".join(chunk.text for chunk in chunks)
            assert "__hit('img')" in stored and "[2]" in stored, kind  # the parser kept them
            highlighted = next(c for c in chunks if "__hit('script')" in c.text)
            text = visitor.open(f"/documents/{document_id}/?chunk={highlighted.pk}")
            if kind in ("xlsx", "csv"):  # shown as the sheet's table, a cell per value
                for line in corpus_lines():
                    assert squash(line) in text, (kind, line)
            else:  # the passages, the cited one highlighted
                assert visitor.page.locator(f"#chunk-{highlighted.pk}[data-highlighted]").count()
                for chunk in chunks:
                    body = chunk.text.split("\n", 1)[-1] if kind == "pptx" else chunk.text
                    assert squash(body) in text, (kind, chunk.index)
            count(live, f"document view ({kind})")
    finally:
        visitor.close()


def test_questions_answers_sources_history_and_sidebar_show_the_corpus_as_text(browser, live):
    from chat.models import ChatSettings, Message

    ChatSettings.objects.update_or_create(pk=1, defaults={"generation_mode": "extractive"})
    visitor = Visitor(browser, live, "victor")
    page = visitor.page
    hostile_question = QUESTION + " " + " ".join(VECTORS.values())
    try:
        visitor.open("/")
        page.locator("#composer-input").fill(hostile_question)
        page.locator("#composer-input").press("Enter")
        page.wait_for_function(
            "() => document.querySelector('#messages [data-role=\"assistant\"]')"
        )
        # while it streams and when it is done: the fragments ran nothing
        visitor.check("streaming")
        page.wait_for_function(IDLE, timeout=60_000)
        text = visitor.check("answer over the WebSocket")
        assert squash(hostile_question) in text
        count(live, "question bubble (WebSocket)")
        answer_id = page.locator('#messages [data-role="assistant"]').last.get_attribute("id")
        answer = Message.objects.get(pk=answer_id.removeprefix("msg-"))
        assert answer.status == "complete", answer.content
        assert "__hit(" in answer.content  # the answer quotes the hostile sentences
        count(live, "streamed answer deltas + final render (WebSocket)")
        count(live, "Sources block")
        badges = page.locator(f"#{answer_id} .cite-badge")
        assert badges.count() == len(re.findall(r"\[\d{1,3}\]", answer.content))

        # The document's literal "[2]", quoted: text, not a badge (and no citation).
        asked = page.locator('#messages [data-role="user"]').count()
        page.locator("#composer-input").fill(
            "In which footnote is the Zephyr gateway code printed?"
        )
        page.locator("#composer-input").press("Enter")
        page.wait_for_function(
            f"() => document.querySelectorAll('#messages [data-role=\"user\"]').length > {asked}"
        )
        page.wait_for_function(IDLE, timeout=60_000)
        visitor.check("second answer")
        footnote_id = page.locator('#messages [data-role="assistant"]').last.get_attribute("id")
        footnote = Message.objects.get(pk=footnote_id.removeprefix("msg-"))
        assert "footnote [2" in footnote.content, footnote.content
        markers = re.findall(r"\[\d{1,3}\]", footnote.content)
        assert page.locator(f"#{footnote_id} .cite-badge").count() == len(markers)
        assert "footnote [2" in squash(page.inner_text(f"#{footnote_id}"))
        count(live, "literal [2] in a quoted sentence", 1)

        conversation_url = page.evaluate("location.pathname")
        text = visitor.open(conversation_url)  # the stored conversation, rendered by the page
        assert squash(hostile_question) in text
        count(live, "conversation page (reload)")
        text = visitor.open("/history/?q=Zephyr")
        count(live, "history search")
        text = visitor.open("/")
        count(live, "sidebar")
    finally:
        visitor.close()


def test_a_hostile_title_and_feedback_comment_in_the_chat_and_the_admin(browser, live):
    from django.test import Client

    from chat.models import Conversation, Message

    title = " ".join(list(VECTORS.values())[:4])[:200]
    comment = "\n".join(VECTORS.values())
    victor = Visitor(browser, live, "victor")
    try:
        conversation = Conversation.objects.filter(owner__username="victor").first()
        if conversation is None:  # this test alone: make one
            from django.contrib.auth import get_user_model

            owner = get_user_model().objects.get(username="victor")
            conversation = Conversation.objects.create(owner=owner, title="x")
            question = Message.objects.create(
                conversation=conversation, role="user", content=QUESTION
            )
            Message.objects.create(
                conversation=conversation, role="assistant", content="Yes. [1]", reply_to=question
            )
        client = Client()
        client.login(username="victor", password=PASSWORD)
        renamed = client.patch(
            f"/api/conversations/{conversation.pk}",
            json.dumps({"title": title}),
            content_type="application/json",
        )
        assert renamed.status_code == 200, renamed.content
        answer = Message.objects.filter(conversation=conversation, role="assistant").first()
        rated = client.post(
            f"/api/messages/{answer.pk}/feedback",
            json.dumps({"rating": "down", "comment": comment}),
            content_type="application/json",
        )
        assert rated.status_code == 200, rated.content

        for path, surface in (
            (f"/c/{conversation.pk}/", "conversation header + sidebar (title)"),
            ("/history/?q=script", "history (title)"),
        ):
            assert squash(title) in victor.open(path), path
            count(live, surface, 4)
    finally:
        victor.close()

    # Two refused questions meaning the same thing: the unanswered report shows one as the
    # group's question and the other as its variant.
    refused = [
        "How do I book the moon shuttle? " + " ".join(VECTORS.values()),
        "How can I book the moon shuttle? " + " ".join(VECTORS.values()),
    ]
    for text in refused:
        question = Message.objects.create(conversation=conversation, role="user", content=text)
        Message.objects.create(
            conversation=conversation,
            role="assistant",
            content="The documents do not say.",
            status=Message.Status.REFUSED,
            reply_to=question,
        )

    mallory = Visitor(browser, live, "mallory")
    try:
        text = mallory.open("/admin/chat/message/unanswered/")
        for asked in refused:
            assert squash(asked)[:80] in text
        count(live, "admin unanswered questions (group + variant)", 2 * len(VECTORS))
        admin_pages = {
            "admin conversations": [
                "/admin/chat/conversation/",
                f"/admin/chat/conversation/{conversation.pk}/change/",
            ],
            "admin messages": [
                "/admin/chat/message/?q=Zephyr",
                f"/admin/chat/message/{answer.pk}/change/",
            ],
            "admin feedback": [
                "/admin/chat/feedback/",
                f"/admin/chat/feedback/{answer.feedback.get().pk}/change/",
            ],
            "admin documents": ["/admin/knowledge/document/"]
            + [f"/admin/knowledge/document/{pk}/change/" for pk in live.documents.values()],
            "admin chunks": ["/admin/knowledge/chunk/?q=__hit"]
            + [
                f"/admin/knowledge/chunk/{chunks_of(pk)[0].pk}/change/"
                for pk in live.documents.values()
            ],
        }
        for surface, paths in admin_pages.items():
            for path in paths:
                text = mallory.open(path)
                if "feedback" in path and "change" in path:
                    assert squash(VECTORS["script"]) in text
                if "conversation" in path:
                    assert squash(title)[:60] in text, path
                count(live, f"{surface} {'change page' if 'change' in path else 'changelist'}")
    finally:
        mallory.close()


def test_a_language_models_hostile_markdown_is_rendered_safe(browser, live):
    from chat.models import ChatSettings, Message
    from tests.support.openai_server import Scripted

    hostile = [
        "The Zephyr gateway rule applies [1]. ",
        "Read [the form](javascript:__hit('mdlink')) or ",
        "![pic](x\" onerror=\"__hit('mdimg')) and <script>__hit('script')</script> ",
        "<img src=x onerror=__hit('img')> <svg onload=__hit('svg')></svg> ",
        "<a href=\"data:text/html,<script>__hit('data')</script>\">data</a> ",
        '<div hx-get="/logout/" hx-trigger="load">x</div> ',
        "<javascript:__hit('autolink')> [x](JaVaScRiPt:__hit('case')) ",
        "[y](&#106;avascript:__hit('entity')) **bold** `<b onclick=__hit('code')>` [1].",
    ]
    ChatSettings.objects.update_or_create(pk=1, defaults={"generation_mode": "generative"})
    live.llm.default = Scripted(pieces=hostile)
    visitor = Visitor(browser, live, "victor")
    page = visitor.page
    try:
        visitor.open("/")
        page.locator("#composer-input").fill(QUESTION)
        page.locator("#composer-input").press("Enter")
        page.wait_for_function(
            "() => document.querySelector('#messages [data-role=\"assistant\"]')"
        )
        page.wait_for_function(IDLE, timeout=60_000)
        text = visitor.check("generative answer (WebSocket)")
        answer_id = page.locator('#messages [data-role="assistant"]').last.get_attribute("id")
        answer = Message.objects.get(pk=answer_id.removeprefix("msg-"))
        assert answer.mode == "generative" and answer.status == "complete", answer.content
        assert "Zephyr gateway rule applies" in text, (answer.mode, answer.content, text)
        assert page.locator(f"#{answer_id} strong").count() >= 1  # Markdown still rendered
        count(live, "generative Markdown (WebSocket)", len(hostile) + 6)
        visitor.open(page.evaluate("location.pathname"))
        count(live, "generative Markdown (page)", len(hostile) + 6)
    finally:
        visitor.close()
        ChatSettings.objects.update_or_create(pk=1, defaults={"generation_mode": "extractive"})
        live.llm.default = Scripted(pieces=["The user asked about the documents."])


def test_zz_report(live):
    """The figures for the closing note (runs last in this module)."""
    total = sum(live.checked.values())
    print(f"\nXSS: {len(VECTORS)} vectors; {len(live.checked)} surfaces; {total} vector x "
          f"surface checks")  # fmt: skip
    for surface, vectors in live.checked.items():
        print(f"  {surface}: {vectors}")
    assert total > 0
