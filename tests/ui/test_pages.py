"""The browser pages over HTTP: access, what each page shows, escaping, delete, history search,
feedback, the document view and its file, and the chat admin."""

from __future__ import annotations

import re
import uuid

import pytest
from django.core.files.base import ContentFile
from django.urls import reverse

from chat.models import ChatSettings, Conversation, Feedback, Message
from chat.unanswered import unanswered_groups
from knowledge.models import Document
from tests.support.conversations import exchange_create
from tests.support.knowledge_base import basis, document_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def handbook(db) -> Document:
    texts = [
        "Full-time employees receive 25 days of paid annual leave per year.",
        "Up to five days of unused leave may be carried over.",
        "Sick leave must be reported before 10:00 on the first day.",
        "Parental leave is 26 weeks at full pay.",
        "Unpaid leave can be requested for up to three months.",
    ]
    return document_create(
        title="Staff handbook",
        texts=texts,
        pages=[3, 3, 4, 5, 6],
        sections=["Leave > Annual", "Leave > Carry-over", "Leave > Sick", "Leave > Parental", None],
        vectors=[basis(i) for i in range(len(texts))],
    )


def history_results(client, **params) -> str:
    """The result list of the history page (the sidebar lists conversations too)."""
    page = client.get("/history/", params).content.decode()
    if 'id="history-results"' not in page:
        return page.split('role="search"', 1)[1]
    return page.split('id="history-results"', 1)[1].split("</ul>", 1)[0]


def chunks_of(document: Document):
    return list(document.chunks.order_by("index").select_related("document"))


# --- Access -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/c/5f0c3a52-7d1e-4b8a-9c2f-0a1b2c3d4e5f/",  # fixed: the same test id in every worker
        "/history/",
        "/settings/documents/",
        "/documents/1/",
        "/documents/1/file/",
    ],
)
def test_anonymous_visitors_are_sent_to_the_login_page(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=")


def test_non_staff_users_get_a_clear_no_access_page(client, django_user_model):
    user = django_user_model.objects.create_user(username="visitor", password="visitor-pass-1")
    client.force_login(user)
    response = client.get("/")
    assert response.status_code == 403
    page = response.content.decode()
    assert "No access" in page and "staff members only" in page
    assert "ws-connect" not in page


def test_login_page_signs_staff_in_and_lands_on_the_chat(client, staff_user):
    page = client.get("/login/").content.decode()
    assert "Sign in to Sourced" in page and 'name="csrfmiddlewaretoken"' in page
    wrong = client.post("/login/", {"username": "staff", "password": "nope"})
    assert wrong.status_code == 200 and "alert-error" in wrong.content.decode()
    response = client.post("/login/", {"username": "staff", "password": "staff-pass-123"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200


def test_logout_is_a_post_and_ends_the_session(staff_client):
    assert staff_client.get("/logout/").status_code == 405
    response = staff_client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert staff_client.get("/").status_code == 302


def test_pages_load_scripts_and_styles_from_this_site_only(staff_client):
    response = staff_client.get("/")
    page = response.content.decode()
    assets = re.findall(r'<(?:script|link)[^>]+(?:src|href)="([^"]+)"', page)
    assert assets and all(url.startswith("/static/") for url in assets)
    assert "/static/vendor/htmx/htmx-2.0.11.min.js" in assets
    assert "/static/vendor/htmx/htmx-ext-ws-2.0.4.min.js" in assets
    # even injected markup could not run a script (the header: tests/config/test_web_hardening.py)
    assert "script-src 'self'" in response["Content-Security-Policy"]


# --- Chat pages -------------------------------------------------------------------------------
def test_home_page_is_a_new_chat_with_composer_and_suggestions(staff_client, handbook):
    page = staff_client.get("/").content.decode()
    match = re.search(r'ws-connect="/ws/chat/([0-9a-f-]{36})/"', page)
    assert match, "the new chat connects its WebSocket under a fresh conversation id"
    assert not Conversation.objects.filter(pk=match.group(1)).exists()  # made on first send
    assert 'id="composer" ws-send' in page
    assert 'name="is_private"' in page  # Private is offered before the first question
    assert page.count("data-suggestion=") == 4
    assert 'name="top_k"' in page and 'min="1" max="20"' in page
    # The settings dialog's documents are fetched when it opens, not sent with every page.
    assert 'name="document_ids"' not in page
    assert 'hx-get="/settings/documents/" hx-trigger="intersect once"' in page
    options = staff_client.get("/settings/documents/")
    assert options.status_code == 200
    assert f'name="document_ids" value="{handbook.pk}"' in options.content.decode()


def test_sidebar_groups_shared_and_private_conversations(
    staff_client, staff_user, other_staff_user
):
    Conversation.objects.create(owner=staff_user, title="My shared chat")
    Conversation.objects.create(owner=staff_user, is_private=True, title="My private chat")
    Conversation.objects.create(owner=other_staff_user, title="Their shared chat")
    Conversation.objects.create(owner=other_staff_user, is_private=True, title="Their secret")
    page = staff_client.get("/").content.decode()
    shared, private = page.split('id="group-private"')
    assert "My shared chat" in shared and "Their shared chat" in shared
    assert "My private chat" in private and "My private chat" not in shared
    assert "Their secret" not in page
    # delete only on the conversations the user owns
    assert 'data-delete-title="My shared chat"' in page
    assert 'data-delete-title="Their shared chat"' not in page


def test_conversation_page_restores_messages_and_citations(staff_client, staff_user, handbook):
    conversation = Conversation.objects.create(owner=staff_user, title="Leave")
    chunks = chunks_of(handbook)
    _, answer = exchange_create(
        conversation,
        question="What leave do I get?",
        answer="You get 25 days [1]. Five can be carried over [2]. Sick leave is reported "
        "early [3]. Parental leave is 26 weeks [4]. Unpaid leave is possible [5].",
        cited=chunks,
    )
    page = staff_client.get(f"/c/{conversation.pk}/").content.decode()
    assert f'ws-connect="/ws/chat/{conversation.pk}/"' in page
    assert page.count('class="cite-badge') == 5
    assert "Grounded in 5 sources" in page
    # the first three sources show, the rest behind "Show more sources"
    visible, more = page.split(f'id="msg-{answer.pk}-more-sources"')
    assert visible.count("data-source=") == 3 and more.count("data-source=") == 2
    assert "Show more sources (2)" in page
    # each source opens the document view at its chunk; copy text has no markers
    assert f"/documents/{handbook.pk}/?chunk={chunks[0].pk}#chunk-{chunks[0].pk}" in page
    assert 'data-copy="You get 25 days. Five can be carried over.' in page
    assert "Page 3 · Leave &gt; Annual" in page
    assert 'name="is_private"' not in page  # privacy is chosen before the first question only


def test_every_text_is_escaped_when_a_conversation_is_reloaded(staff_client, staff_user):
    document = document_create(
        title="<b>Bold</b> policy",
        texts=["Badges <img src=x onerror=alert(1)> are printed at reception."],
        vectors=[basis(0)],
    )
    conversation = Conversation.objects.create(owner=staff_user, title="<script>t()</script>")
    exchange_create(
        conversation,
        question="Where? <script>alert(2)</script>",
        answer="Badges <img src=x onerror=alert(1)> are printed at reception [1].",
        cited=chunks_of(document),
    )
    for url in (f"/c/{conversation.pk}/", "/history/?q=badges", f"/documents/{document.pk}/"):
        page = staff_client.get(url).content.decode()
        assert "<script>alert" not in page and "<script>t()" not in page, url
        assert "<img src=x" not in page and "<b>Bold" not in page, url
    page = staff_client.get(f"/c/{conversation.pk}/").content.decode()
    assert "Where? &lt;script&gt;alert(2)&lt;/script&gt;" in page
    assert "Badges &lt;img src=x onerror=alert(1)&gt; are printed" in page
    assert "&lt;b&gt;Bold&lt;/b&gt; policy" in page


def test_private_conversation_of_another_user_cannot_be_opened(staff_client, other_staff_user):
    secret = Conversation.objects.create(owner=other_staff_user, is_private=True, title="Secret")
    response = staff_client.get(f"/c/{secret.pk}/")
    assert response.status_code == 404
    assert "Secret" not in response.content.decode()


def test_shared_conversation_of_another_user_is_read_only(staff_client, other_staff_user):
    shared = Conversation.objects.create(owner=other_staff_user, title="Their question")
    exchange_create(shared, question="Anything?", answer="Something.")
    page = staff_client.get(f"/c/{shared.pk}/").content.decode()
    assert "Their question" in page and "Something." in page
    assert 'id="composer"' not in page and "data-read-only" in page
    assert "data-regenerate" not in page


def test_owner_deletes_a_conversation_and_nobody_else_can(staff_client, other_client, staff_user):
    conversation = Conversation.objects.create(owner=staff_user, title="To delete")
    url = reverse("chat:conversation_delete", args=[conversation.pk])
    assert staff_client.get(url).status_code == 405
    assert other_client.post(url).status_code == 403
    assert Conversation.objects.filter(pk=conversation.pk).exists()
    response = staff_client.post(url, {"next": f"/c/{conversation.pk}/"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert not Conversation.objects.filter(pk=conversation.pk).exists()


def test_history_is_newest_first_and_searches_titles_and_message_text(
    staff_client, staff_user, other_staff_user
):
    older = Conversation.objects.create(owner=staff_user, title="Leave question")
    exchange_create(older, question="How much leave?", answer="You get 25 days of leave.")
    newer = Conversation.objects.create(owner=other_staff_user, title="Expenses question")
    exchange_create(newer, question="Taxis?", answer="Taxis are reimbursed after 22:00.")
    secret = Conversation.objects.create(
        owner=other_staff_user, is_private=True, title="Taxis and more"
    )
    exchange_create(secret, question="Taxis at night?", answer="Taxis are reimbursed.")
    Conversation.objects.filter(pk=older.pk).update(updated_at="2026-01-01T10:00:00Z")

    listed = history_results(staff_client)
    assert listed.index("Expenses question") < listed.index("Leave question")
    assert "Taxis and more" not in listed

    found = history_results(staff_client, q="reimbursed")
    assert "Expenses question" in found and "Leave question" not in found
    assert "Taxis and more" not in found  # someone else's private chat, never
    assert "Taxis are reimbursed after 22:00." in found  # the matching text is shown
    assert "Leave question" in history_results(staff_client, q="LEAVE")
    assert "Nothing matches" in history_results(staff_client, q="zeppelin")


def test_feedback_is_recorded_and_shown_pressed(staff_client, staff_user):
    conversation = Conversation.objects.create(owner=staff_user, title="Leave")
    _, answer = exchange_create(conversation, question="Leave?", answer="25 days.")
    url = reverse("chat:message_feedback", args=[answer.pk])
    response = staff_client.post(url, {"rating": "-1"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert 'aria-label="Unhelpful answer" aria-pressed="true"' in response.content.decode()
    assert Feedback.objects.get(message=answer, user=staff_user).rating == -1
    assert staff_client.post(url, {"rating": "5"}).status_code == 400
    page = staff_client.get(f"/c/{conversation.pk}/").content.decode()
    assert 'aria-label="Unhelpful answer" aria-pressed="true"' in page


def test_feedback_on_someone_elses_private_answer_is_refused(other_client, staff_user):
    secret = Conversation.objects.create(owner=staff_user, is_private=True, title="Secret")
    _, answer = exchange_create(secret, question="Leave?", answer="25 days.")
    url = reverse("chat:message_feedback", args=[answer.pk])
    assert other_client.post(url, {"rating": "1"}).status_code == 403
    assert not Feedback.objects.exists()


# --- Documents --------------------------------------------------------------------------------
def test_document_view_shows_chunks_in_order_and_highlights_the_cited_one(staff_client, handbook):
    chunks = chunks_of(handbook)
    page = staff_client.get(f"/documents/{handbook.pk}/?chunk={chunks[2].pk}").content.decode()
    positions = [page.index(chunk.text) for chunk in chunks]
    assert positions == sorted(positions)
    for chunk in chunks:
        assert f'id="chunk-{chunk.pk}"' in page
    highlighted = re.search(r'<li id="chunk-(\d+)"[^>]*data-highlighted', page)
    assert highlighted and int(highlighted.group(1)) == chunks[2].pk
    assert "Cited passage" in page and "Page 4" in page and "Leave &gt; Sick" in page
    gone = staff_client.get(f"/documents/{handbook.pk}/?chunk=999999").content.decode()
    assert "no longer in this document" in gone


def test_original_pdf_opens_inline_and_other_files_download(
    staff_client, client, settings, tmp_path
):
    settings.MEDIA_ROOT = tmp_path
    pdf = Document.objects.create(
        title="Expenses", source="expenses.pdf", media_type="application/pdf", status="ready"
    )
    pdf.file.save("expenses.pdf", ContentFile(b"%PDF-1.4 test"))
    html = Document.objects.create(
        title="Security", source="security.html", media_type="text/html", status="ready"
    )
    html.file.save("security.html", ContentFile(b"<script>alert(1)</script>"))

    response = staff_client.get(f"/documents/{pdf.pk}/file/")
    assert response.status_code == 200 and response["Content-Type"] == "application/pdf"
    assert response["Content-Disposition"].startswith("inline")
    assert b"".join(response.streaming_content) == b"%PDF-1.4 test"

    response = staff_client.get(f"/documents/{html.pk}/file/")
    assert response["Content-Disposition"].startswith("attachment")
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Security-Policy"] == "sandbox"

    assert client.get(f"/documents/{pdf.pk}/file/").status_code == 302  # login first
    missing = Document.objects.create(title="Gone", source="gone.txt", media_type="text/plain")
    assert staff_client.get(f"/documents/{missing.pk}/file/").status_code == 404
    view = staff_client.get(f"/documents/{pdf.pk}/").content.decode()
    assert f"/documents/{pdf.pk}/file/" in view


# --- Admin ------------------------------------------------------------------------------------
@pytest.fixture
def admin_client_(client, django_user_model):
    admin = django_user_model.objects.create_superuser(username="boss", password="boss-pass-1")
    client.force_login(admin)
    return client


def test_chat_settings_admin_edits_the_single_row(admin_client_):
    response = admin_client_.get("/admin/chat/chatsettings/")
    chat_settings = ChatSettings.objects.get()
    assert response["Location"] == f"/admin/chat/chatsettings/{chat_settings.pk}/change/"
    page = admin_client_.get(response["Location"]).content.decode()
    assert 'type="radio"' in page and "Generative" in page
    response = admin_client_.post(
        response["Location"],
        {
            "generation_mode": "generative",
            "evidence_threshold": "0.4",
            "default_top_k": "6",
            "max_history_turns": "4",
        },
    )
    assert response.status_code == 302
    chat_settings.refresh_from_db()
    assert chat_settings.generation_mode == "generative" and chat_settings.default_top_k == 6
    assert admin_client_.get("/admin/chat/chatsettings/add/").status_code == 403


def refusal_create(owner, question: str) -> None:
    conversation = Conversation.objects.create(owner=owner, title=question)
    exchange_create(
        conversation,
        question=question,
        answer="I don't have enough information to answer that question.",
        status=Message.Status.REFUSED,
        suggestions=["Contact support", "Rephrase your question"],
    )


def test_unanswered_questions_are_grouped_by_meaning_newest_first(admin_client_, staff_user):
    refusal_create(staff_user, "What is the guest wifi password?")
    refusal_create(staff_user, "How do I book a parking space?")
    refusal_create(staff_user, "how can I book a parking space")
    refusal_create(staff_user, "How do I book a parking space at the office?")
    groups = unanswered_groups()
    assert [group.count for group in groups] == [3, 1]
    assert groups[0].text == "How do I book a parking space at the office?"  # newest wording
    assert groups[0].variants == [
        "how can I book a parking space",
        "How do I book a parking space?",
    ]
    assert groups[1].text == "What is the guest wifi password?"

    page = admin_client_.get(reverse("admin:chat_message_unanswered")).content.decode()
    assert page.index("parking space at the office") < page.index("guest wifi password")
    assert re.search(r'class="count">3<', page)
    assert "Unanswered questions" in admin_client_.get("/admin/").content.decode()


def test_feedback_review_lists_thumbs_down_with_question_and_sources(
    admin_client_, staff_user, handbook
):
    conversation = Conversation.objects.create(owner=staff_user, title="Leave")
    _, bad = exchange_create(
        conversation,
        question="Carry over?",
        answer="Five days [1].",
        cited=chunks_of(handbook)[1:2],
    )
    _, good = exchange_create(conversation, question="Annual?", answer="25 days.")
    Feedback.objects.create(user=staff_user, message=bad, rating=-1)
    Feedback.objects.create(user=staff_user, message=good, rating=1)
    page = admin_client_.get("/admin/chat/feedback/").content.decode()
    assert "Carry over?" in page and "Five days [1]." in page and "Staff handbook" in page
    assert "Annual?" not in page  # thumbs down first: that is what needs review
    everything = admin_client_.get("/admin/chat/feedback/?rating=all").content.decode()
    assert "Annual?" in everything


def test_a_fragment_request_after_the_session_ended_sends_the_page_to_login(client):
    response = client.post(
        reverse("chat:message_feedback", args=[uuid.uuid4()]),
        {"rating": "1"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 204
    assert response["HX-Redirect"].startswith("/login/?next=")


def test_conversation_page_queries_do_not_grow_with_its_length(staff_client, staff_user, handbook):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    chunks = chunks_of(handbook)

    def queries_for(exchanges: int) -> int:
        conversation = Conversation.objects.create(owner=staff_user, title=f"{exchanges}")
        for i in range(exchanges):
            exchange_create(
                conversation, question=f"Q{i}?", answer="A [1]. B [2]. C [3].", cited=chunks[:3]
            )
        with CaptureQueriesContext(connection) as captured:
            assert staff_client.get(f"/c/{conversation.pk}/").status_code == 200
        return len(captured)

    assert queries_for(6) == queries_for(1)


# --- Rename -----------------------------------------------------------------------------------
def htmx_from(page_path: str) -> dict[str, str]:
    """The headers htmx sends with a request from the page at `page_path`."""
    return {"HTTP_HX_REQUEST": "true", "HTTP_HX_CURRENT_URL": f"http://testserver{page_path}"}


def sidebar_titles(html: str, group: str) -> list[str]:
    """The titles of a sidebar group, in order, in a page or a conversation-list fragment."""
    listed = html.split('id="conversation-list"', 1)[1]
    shared, private = listed.split('id="group-private"', 1)
    part = shared if group == "shared" else private
    return re.findall(r"data-sidebar-title>([^<]*)<", part)


def test_owner_renames_from_the_header_and_the_page_follows(staff_client, staff_user):
    older = Conversation.objects.create(owner=staff_user, title="Hotel question")
    Conversation.objects.create(owner=staff_user, title="Newer chat")
    page = f"/c/{older.pk}/"
    assert sidebar_titles(staff_client.get(page).content.decode(), "shared") == [
        "Newer chat",
        "Hotel question",
    ]

    editor = staff_client.get(
        reverse("chat:conversation_title", args=[older.pk]) + "?place=header&edit=1",
        **htmx_from(page),
    ).content.decode()
    assert 'id="conversation-title"' in editor and 'name="csrfmiddlewaretoken"' in editor
    assert 'value="Hotel question"' in editor and "autofocus" in editor
    assert '<label for="rename-header-' in editor and "Conversation title" in editor

    response = staff_client.post(
        reverse("chat:conversation_rename", args=[older.pk]),
        {"title": "  Hotel <b>caps</b>\n in London  ", "place": "header"},
        **htmx_from(page),
    )
    assert response.status_code == 200
    older.refresh_from_db()
    assert older.title == "Hotel <b>caps</b> in London"  # spaces collapsed, text kept as typed
    html = response.content.decode()
    escaped = "Hotel &lt;b&gt;caps&lt;/b&gt; in London"
    assert "<b>caps" not in html
    assert f"<title>{escaped} · Sourced</title>" in html  # the browser tab follows
    assert 'id="conversation-title" class="flex min-w-0 items-center gap-1" hx-swap-oob="true"' in (
        html
    )
    assert f"data-conversation-title>{escaped}</h1>" in html
    assert 'id="conversation-list" hx-swap-oob="true"' in html
    # renaming makes it the most recent: first in its group, and still the page's active item
    assert sidebar_titles(html, "shared") == [escaped, "Newer chat"]
    assert re.search(rf'id="sidebar-{older.pk}"[^>]*>\s*<a [^>]*menu-active', html)
    reloaded = staff_client.get(page).content.decode()
    assert f"<title>{escaped} · Sourced</title>" in reloaded
    assert sidebar_titles(reloaded, "shared") == [escaped, "Newer chat"]


def test_renaming_in_the_sidebar_of_another_page_leaves_that_page_header_alone(
    staff_client, staff_user
):
    shown = Conversation.objects.create(owner=staff_user, title="The open chat")
    other = Conversation.objects.create(owner=staff_user, is_private=True, title="Other chat")
    page = f"/c/{shown.pk}/"
    response = staff_client.post(
        reverse("chat:conversation_rename", args=[other.pk]),
        {"title": "Renamed in the sidebar", "place": "sidebar"},
        **htmx_from(page),
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "conversation-title" not in html and "<title>" not in html
    assert sidebar_titles(html, "private") == ["Renamed in the sidebar"]
    assert sidebar_titles(html, "shared") == ["The open chat"]
    # the page's own conversation stays highlighted; the renamed item's button keeps the focus
    assert re.search(rf'id="sidebar-{shown.pk}"[^>]*>\s*<a [^>]*menu-active', html)
    assert not re.search(rf'id="sidebar-{other.pk}"[^>]*>\s*<a [^>]*menu-active', html)
    renamed_item = html.split(f'id="sidebar-{other.pk}"', 1)[1].split("</li>", 1)[0]
    rename_button = renamed_item.split('aria-label="Rename conversation: ', 1)[1].split(">", 1)[0]
    assert rename_button.startswith('Renamed in the sidebar"') and "autofocus" in rename_button
    assert html.count("autofocus") == 1
    cancelled = staff_client.get(
        reverse("chat:conversation_title", args=[other.pk]) + "?place=sidebar",
        **htmx_from(page),
    ).content.decode()
    assert cancelled.startswith(f'<li id="sidebar-{other.pk}"') and "<form" not in cancelled


def test_an_invalid_title_comes_back_in_the_editor_with_a_readable_error(staff_client, staff_user):
    conversation = Conversation.objects.create(owner=staff_user, title="Leave")
    url = reverse("chat:conversation_rename", args=[conversation.pk])
    page = f"/c/{conversation.pk}/"
    empty = staff_client.post(url, {"title": " \t ", "place": "header"}, **htmx_from(page))
    assert empty.status_code == 422
    html = empty.content.decode()
    assert 'id="conversation-title" hx-swap-oob="true"' in html  # the editor, in place
    assert 'role="alert"' in html and "The title is empty." in html
    assert 'aria-invalid="true"' in html and 'aria-describedby="rename-header-' in html

    too_long = "<i>" + "x" * 200
    response = staff_client.post(url, {"title": too_long, "place": "sidebar"}, **htmx_from(page))
    assert response.status_code == 422
    html = response.content.decode()
    assert "The title is too long: the limit is 200 characters." in html
    assert f'<li id="sidebar-{conversation.pk}"' in html and 'hx-swap-oob="true"' in html
    assert 'value="&lt;i&gt;xxx' in html and "<i>" not in html  # what was typed, escaped
    conversation.refresh_from_db()
    assert conversation.title == "Leave"


def test_only_the_owner_sees_the_rename_control_and_may_rename(
    staff_client, other_client, staff_user, other_staff_user
):
    mine = Conversation.objects.create(owner=staff_user, title="Mine")
    theirs = Conversation.objects.create(owner=other_staff_user, title="Theirs")
    secret = Conversation.objects.create(owner=other_staff_user, is_private=True, title="Secret")

    own_page = staff_client.get(f"/c/{mine.pk}/").content.decode()
    assert 'aria-label="Rename conversation"' in own_page
    assert 'aria-label="Rename conversation: Mine"' in own_page
    their_page = staff_client.get(f"/c/{theirs.pk}/").content.decode()
    assert 'aria-label="Rename conversation"' not in their_page  # not in the header
    assert "Rename conversation: Theirs" not in their_page  # nor in the sidebar

    rename = reverse("chat:conversation_rename", args=[theirs.pk])
    editor = reverse("chat:conversation_title", args=[theirs.pk]) + "?place=header&edit=1"
    assert staff_client.post(rename, {"title": "Hijacked"}).status_code == 403
    assert staff_client.get(editor).status_code == 403
    secret_rename = reverse("chat:conversation_rename", args=[secret.pk])
    response = staff_client.post(secret_rename, {"title": "Hijacked"})
    assert response.status_code == 404 and "Secret" not in response.content.decode()
    assert staff_client.get(rename).status_code == 405
    theirs.refresh_from_db()
    secret.refresh_from_db()
    assert (theirs.title, secret.title) == ("Theirs", "Secret")
    assert other_client.post(rename, {"title": "Their new title"}).status_code == 200


# --- "Searched for" under answers -------------------------------------------------------------
def test_what_was_searched_for_shows_under_an_answer_when_it_is_not_the_question(
    staff_client, other_client, staff_user
):
    conversation = Conversation.objects.create(owner=staff_user, title="Hotels")
    _, follow_up = exchange_create(conversation, question="And in London?", answer="120 pounds.")
    _, same = exchange_create(conversation, question="What is the hotel cap?", answer="100.")
    _, refused = exchange_create(
        conversation,
        question="And <b>Paris</b>?",
        answer="I don't have enough information to answer that question.",
        status=Message.Status.REFUSED,
    )
    _, older = exchange_create(conversation, question="Taxis?", answer="After 22:00.")
    Message.objects.filter(pk=follow_up.pk).update(search_query="hotel cap London")
    Message.objects.filter(pk=same.pk).update(search_query="  what is the HOTEL\ncap? ")
    Message.objects.filter(pk=refused.pk).update(search_query="hotel cap <b>Paris</b>")

    def searched_for(page: str, message: Message) -> str:
        bubble = page.split(f'id="msg-{message.pk}" class="chat', 1)[1]
        bubble = bubble.split('class="chat chat-', 1)[0]  # up to the next message
        found = re.search(r"data-search-query>.*?Searched for: ([^<]*)</span>", bubble, re.S)
        return found.group(1) if found else ""

    for reader in (staff_client, other_client):  # the owner, and a reader of the shared chat
        page = reader.get(f"/c/{conversation.pk}/").content.decode()
        assert searched_for(page, follow_up) == "hotel cap London"
        assert searched_for(page, refused) == "hotel cap &lt;b&gt;Paris&lt;/b&gt;"
        assert searched_for(page, same) == ""  # the question itself, give or take case
        assert searched_for(page, older) == ""  # nothing recorded
        assert "<b>Paris" not in page
