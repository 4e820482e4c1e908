"""The chat's details, as the server renders and stores them: the comment box a thumbs down
opens (and the comment in the admin's review), "New chat" disabled on an empty chat, the
`/c/new?q=...` link, and the per-user "show citations" preference. Their behaviour in a
browser is tests/ui/test_details_browser.py's."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from accounts.models import Preferences
from accounts.selectors import preferences_of
from chat.models import Conversation, Feedback, Message
from tests.support.conversations import exchange_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(staff_user) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


@pytest.fixture
def answer(staff_user) -> Message:
    conversation = Conversation.objects.create(owner=staff_user, title="Leave")
    _, answer = exchange_create(conversation, question="Leave?", answer="25 days.")
    return answer


def feedback_post(client: Client, answer: Message, **data) -> tuple[int, str]:
    url = reverse("chat:message_feedback", args=[answer.pk])
    response = client.post(url, data, HTTP_HX_REQUEST="true")
    return response.status_code, response.content.decode()


# --- Feedback comment ---------------------------------------------------------------------
def test_thumbs_down_opens_a_comment_box_and_thumbs_up_does_not(staff_client, answer):
    status, html = feedback_post(staff_client, answer, rating="-1")
    assert status == 200
    assert "data-feedback-comment" in html and 'name="comment"' in html
    assert 'maxlength="2000"' in html
    status, html = feedback_post(staff_client, answer, rating="1")
    assert status == 200
    assert "Thanks for the feedback" in html and "data-feedback-comment" not in html


def test_the_comment_is_stored_with_the_thumbs_down_and_the_box_closes(
    staff_client, staff_user, answer
):
    feedback_post(staff_client, answer, rating="-1")
    status, html = feedback_post(
        staff_client, answer, rating="-1", comment="  It quoted the 2019 policy.  "
    )
    assert status == 200
    assert "Thanks for the feedback" in html and "data-feedback-comment" not in html
    assert 'aria-label="Unhelpful answer" aria-pressed="true"' in html
    feedback = Feedback.objects.get(user=staff_user, message=answer)
    assert (feedback.rating, feedback.comment) == (-1, "It quoted the 2019 policy.")


def test_a_too_long_comment_is_explained_and_kept_in_the_box(staff_client, staff_user, answer):
    feedback_post(staff_client, answer, rating="-1")
    status, html = feedback_post(staff_client, answer, rating="-1", comment="x" * 2001)
    assert status == 422  # swapped in by htmx like a success (templates/base.html)
    assert "At most 2000 characters" in html and 'aria-invalid="true"' in html
    assert "x" * 2001 in html  # nothing typed is lost
    assert Feedback.objects.get(user=staff_user, message=answer).comment == ""


def test_a_comment_is_escaped_in_the_box(staff_client, answer):
    status, html = feedback_post(staff_client, answer, rating="-1", comment="<b>" + "y" * 2000)
    assert status == 422
    assert "<b>y" not in html and "&lt;b&gt;y" in html


def test_the_comment_shows_in_the_admin_feedback_review(client, django_user_model, staff_user):
    admin = django_user_model.objects.create_superuser(username="boss", password="boss-pass-1")
    client.force_login(admin)
    conversation = Conversation.objects.create(owner=staff_user, title="Leave")
    _, answer = exchange_create(conversation, question="Carry over?", answer="Five days.")
    Feedback.objects.create(
        user=staff_user, message=answer, rating=-1, comment="Wrong year <i>again</i>"
    )
    listing = client.get("/admin/chat/feedback/").content.decode()
    assert "Wrong year &lt;i&gt;again&lt;/i&gt;" in listing


# --- New chat -------------------------------------------------------------------------------
def new_chat_link(html: str) -> str:
    start = html.index("<a ", html.index('data-tip="New chat"') - 400)
    return html[start : html.index(">", html.index('id="new-chat-button"'))]


def test_new_chat_is_disabled_on_an_empty_chat_only(staff_client, answer):
    empty = new_chat_link(staff_client.get("/").content.decode())
    assert 'aria-disabled="true"' in empty and "btn-disabled" in empty
    assert "href=" not in empty.replace("data-href=", "")
    started = new_chat_link(staff_client.get(f"/c/{answer.conversation_id}/").content.decode())
    assert 'aria-disabled="true"' not in started and 'href="/"' in started
    history = new_chat_link(staff_client.get("/history/").content.decode())
    assert 'aria-disabled="true"' not in history


# --- /c/new?q= ------------------------------------------------------------------------------
def composer_of(html: str) -> str:
    return html[html.index('<form id="composer"') : html.index("</textarea>")]


def private_box_of(html: str) -> str:
    start = html.index('name="is_private"')
    return html[start : html.index(">", start)]


def test_a_question_link_fills_the_composer_to_be_sent_by_the_page(staff_client, staff_user):
    response = staff_client.get(
        "/c/new/", {"q": "How do I claim <travel> expenses?"}, HTTP_SEC_FETCH_SITE="none"
    )
    assert response.status_code == 200
    composer = composer_of(response.content.decode())
    assert "data-autosend" in composer
    assert "checked" in private_box_of(response.content.decode())  # the conversation: private
    assert composer.endswith(">How do I claim &lt;travel&gt; expenses?")
    # The GET stores nothing: the page's own script sends the question over its socket.
    assert not Conversation.objects.filter(owner=staff_user).exists()
    assert not Message.objects.exists()


@pytest.mark.parametrize(
    ("headers", "sent"),
    [
        ({"HTTP_SEC_FETCH_SITE": "same-origin"}, True),
        ({"HTTP_SEC_FETCH_SITE": "none"}, True),  # typed, a bookmark, another application
        ({"HTTP_SEC_FETCH_SITE": "cross-site"}, False),
        ({"HTTP_SEC_FETCH_SITE": "cross-site", "HTTP_REFERER": "https://evil.example/x"}, False),
        ({"HTTP_SEC_FETCH_SITE": "same-site", "HTTP_REFERER": "https://www.example.org/"}, False),
        (
            {"HTTP_SEC_FETCH_SITE": "cross-site", "HTTP_REFERER": "https://Intranet.example.org/a"},
            True,  # a listed origin
        ),
        (
            {"HTTP_SEC_FETCH_SITE": "cross-site", "HTTP_REFERER": "http://intranet.example.org/"},
            False,  # another scheme: another origin
        ),
        ({}, False),  # no Sec-Fetch-Site (an older browser) and no referrer
        ({"HTTP_REFERER": "http://testserver/c/1/"}, True),  # ... from this origin
        ({"HTTP_REFERER": "https://evil.example/"}, False),
        # this origin's referrer does not outweigh what the browser says
        ({"HTTP_SEC_FETCH_SITE": "cross-site", "HTTP_REFERER": "http://testserver/"}, False),
    ],
)
def test_a_question_link_sends_itself_only_from_this_site_or_a_listed_origin(
    staff_client, staff_user, settings, headers, sent
):
    settings.QUESTION_LINK_ORIGINS = ["https://intranet.example.org"]
    response = staff_client.get("/c/new/", {"q": "What is the pay band of Grade 7?"}, **headers)
    html = response.content.decode()
    composer = composer_of(html)
    assert composer.endswith(">What is the pay band of Grade 7?")  # always in the composer
    assert ("data-autosend" in composer) is sent
    assert ("comes from a link on another site and was not sent" in html) is not sent
    assert "checked" in private_box_of(html)
    assert not Message.objects.exists()


def test_a_question_link_without_a_question_is_a_new_chat(staff_client):
    for query in ({}, {"q": "   "}):
        response = staff_client.get("/c/new/", query)
        assert response.status_code == 200
        composer = composer_of(response.content.decode())
        assert "data-autosend" not in composer and composer.endswith(">")  # empty


def test_a_too_long_question_in_a_link_is_cut_unsent_and_explained(staff_client, settings):
    settings.CHAT_MAX_MESSAGE_CHARS = 50
    response = staff_client.get("/c/new/", {"q": "a" * 80})
    html = response.content.decode()
    assert response.status_code == 200
    assert "data-autosend" not in composer_of(html)
    assert composer_of(html).endswith(">" + "a" * 50)
    assert "longer than 50 characters" in html


def test_a_question_link_sends_a_signed_out_visitor_to_login_and_back(client):
    response = client.get("/c/new/", {"q": "Leave?"})
    assert response.status_code == 302
    assert response["Location"].startswith("/login/?next=/c/new/%3Fq%3DLeave%253F")


def test_a_question_link_takes_get_only(staff_client):
    assert staff_client.post("/c/new/", {"q": "Leave?"}).status_code == 405


# --- Show citations -------------------------------------------------------------------------
def test_show_citations_is_stored_per_user_and_rendered_on_their_pages(
    staff_client, staff_user, other_staff_user, answer
):
    page = f"/c/{answer.conversation_id}/"
    assert preferences_of(user=staff_user).show_citations is True  # the default, no row
    assert 'data-show-citations="true"' in staff_client.get(page).content.decode()
    assert 'id="show-citations"' in staff_client.get(page).content.decode()

    response = staff_client.post(reverse("preferences"), {}, HTTP_HX_REQUEST="true")
    assert response.status_code == 204
    assert Preferences.objects.get(user=staff_user).show_citations is False
    html = staff_client.get(page).content.decode()
    assert 'data-show-citations="false"' in html
    toggle = html[html.index('id="show-citations"') : html.index(">", html.index('id="show-cit'))]
    assert "checked" not in toggle

    other = Client()
    other.force_login(other_staff_user)
    assert 'data-show-citations="true"' in other.get("/").content.decode()  # per user

    staff_client.post(reverse("preferences"), {"show_citations": "true"})
    assert Preferences.objects.get(user=staff_user).show_citations is True
    assert Preferences.objects.count() == 1


def test_preferences_take_a_signed_in_staff_post_only(client, staff_client):
    assert staff_client.get(reverse("preferences")).status_code == 405
    response = client.post(reverse("preferences"), {"show_citations": "true"})
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert not Preferences.objects.exists()
