"""Web hardening: CSRF on every form and every state-changing route, a Content-Security-Policy
header without inline script on every page (the admin and the API docs included), and the
production settings the README documents (`DJANGO_SECURE=1`) clean under `check --deploy`.
The WebSocket origin check on a live server is in tests/chat/transports/test_socket_origin.py."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from html.parser import HTMLParser

import httpx
import pytest
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from chat.models import ChatSettings, Conversation, Feedback, Message
from knowledge.models import Document
from tests.support.knowledge_base import LEAVE_TEXTS, document_create
from tests.support.live_server import BASE_DIR, daphne_server, database_url_of

PRODUCTION_ENV = {
    "DJANGO_SECURE": "1",
    "DJANGO_ALLOWED_HOSTS": "sourced.example.org",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "https://sourced.example.org",
    "TRUSTED_PROXY_COUNT": "1",
}


class _PageScan(HTMLParser):
    """Inline scripts, event-handler attributes, javascript: URLs and POST forms of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.inline_scripts = 0
        self.handlers: list[str] = []
        self.javascript_urls: list[str] = []
        self.post_forms: list[dict] = []  # {"csrf": bool, "htmx": bool}
        self._form: dict | None = None
        self.body_csrf_header = False

    def handle_starttag(self, tag: str, attrs: list) -> None:
        values = dict(attrs)
        data_only = values.get("type") in {"application/json", "application/ld+json"}
        if tag == "script" and not values.get("src") and not data_only:
            self.inline_scripts += 1
        for name, value in attrs:
            if name.startswith("on"):
                self.handlers.append(f"<{tag} {name}>")
            if name in {"href", "src", "action", "formaction"} and (
                value or ""
            ).strip().lower().startswith("javascript:"):
                self.javascript_urls.append(f"<{tag} {name}={value}>")
        if tag == "body" and "X-CSRFToken" in (values.get("hx-headers") or ""):
            self.body_csrf_header = True
        if tag == "form":
            method = (values.get("method") or "get").lower()
            htmx = any(values.get(k) for k in ("hx-post", "hx-put", "hx-patch", "hx-delete"))
            self._form = {"csrf": False, "htmx": htmx, "post": method == "post" or htmx}
            if self._form["post"]:
                self.post_forms.append(self._form)
        token = values.get("name") == "csrfmiddlewaretoken" and values.get("value")
        if tag == "input" and self._form is not None and token:
            self._form["csrf"] = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None


def scan(response) -> _PageScan:
    page = _PageScan()
    page.feed(response.content.decode())
    return page


@pytest.fixture
def superuser_client(django_user_model) -> Client:
    user = django_user_model.objects.create_superuser(username="root", password="root-pass-123")
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def site(django_user_model):
    """A document, a conversation with a question, an answer and feedback, chat settings."""
    owner = django_user_model.objects.create_user(username="owner", is_staff=True)
    document = document_create(title="Staff handbook", texts=LEAVE_TEXTS)
    conversation = Conversation.objects.create(owner=owner, title="Leave")
    question = Message.objects.create(conversation=conversation, role="user", content="Leave?")
    answer = Message.objects.create(
        conversation=conversation, role="assistant", content="25 days.", reply_to=question
    )
    Feedback.objects.create(user=owner, message=answer, rating=Feedback.Rating.UP)
    ChatSettings.objects.get_or_create(pk=1)
    return {"document": document, "conversation": conversation, "answer": answer}


def admin_refuses(url: str, user) -> bool:
    """Whether the admin itself refuses `user` the add or change form at `url` (a model whose
    rows are made elsewhere has no add form, one kept as recorded no change form): the one
    reason a page may answer a superuser 403."""
    from django.test import RequestFactory
    from django.urls import resolve

    match = resolve(url)
    model_admin = getattr(match.func, "model_admin", None)
    if model_admin is None:
        return False
    request = RequestFactory().get(url)
    request.user = user
    if match.url_name.endswith("_add"):
        return not model_admin.has_add_permission(request)
    if match.url_name.endswith("_change"):
        obj = model_admin.get_object(request, match.kwargs["object_id"])
        return not model_admin.has_view_or_change_permission(request, obj)
    return False


def admin_pages(site) -> list[str]:
    """The admin's index, every model's list and add/change form, and the custom views."""
    objects = {
        Document: site["document"].pk,
        Conversation: site["conversation"].pk,
        Message: site["answer"].pk,
        Feedback: Feedback.objects.get().pk,
        ChatSettings: 1,
    }
    urls = ["/admin/", reverse("admin:chat_message_unanswered")]
    for model in admin.site._registry:
        info = (model._meta.app_label, model._meta.model_name)
        urls.append(reverse("admin:{}_{}_changelist".format(*info)))
        urls.append(reverse("admin:{}_{}_add".format(*info)))
        pk = objects.get(model) or model.objects.values_list("pk", flat=True).first()
        if pk is not None:
            urls.append(reverse("admin:{}_{}_change".format(*info), args=[pk]))
    return urls


@pytest.mark.django_db
def test_every_page_has_the_csp_header_and_no_inline_script(superuser_client, site):
    """Measured over every page of the site and of the admin: no inline <script>, no event
    handler attribute, no javascript: URL, so the policy (script-src 'self') breaks nothing."""
    pages = [
        "/",
        f"/c/{site['conversation'].pk}/",
        "/history/",
        f"/documents/{site['document'].pk}/",
        "/api/docs/",
        *admin_pages(site),
    ]
    anonymous = ["/login/", "/admin/login/"]
    superuser = get_user_model().objects.get(username="root")
    refused = {url for url in pages if admin_refuses(url, superuser)}
    print(f"refused by the admin itself: {sorted(refused)}")
    checked = 0
    for client, urls in ((superuser_client, pages), (Client(), anonymous)):
        for url in urls:
            response = client.get(url, follow=True)
            expected = 403 if url in refused else 200
            assert response.status_code == expected, (url, response.status_code)
            assert response["Content-Security-Policy"] == settings.CONTENT_SECURITY_POLICY, url
            assert "script-src 'self'" in response["Content-Security-Policy"]
            assert "unsafe-inline" not in response["Content-Security-Policy"].split("style-src")[0]
            assert response["X-Frame-Options"] == "DENY", url
            page = scan(response)
            assert page.inline_scripts == 0, url
            assert not page.handlers, (url, page.handlers)
            assert not page.javascript_urls, (url, page.javascript_urls)
            checked += 1
    print(f"{checked} pages checked: no inline script, the policy on each")
    assert checked > 20
    # The API and the errors carry it too.
    assert "Content-Security-Policy" in superuser_client.get("/api/documents")
    assert "Content-Security-Policy" in superuser_client.get("/no-such-page/")


@pytest.mark.django_db
def test_an_original_pdf_may_be_framed_by_this_origin_only(superuser_client, tmp_path):
    from knowledge.services import document_ingest
    from tests.support import documents

    path = tmp_path / "policy.pdf"
    path.write_bytes(documents.pdf_bytes())
    document = document_ingest(path=path).document
    response = superuser_client.get(f"/documents/{document.pk}/file/")
    assert response.status_code == 200
    assert response["X-Frame-Options"] == "SAMEORIGIN"
    assert response["Content-Security-Policy"] == "frame-ancestors 'self'"


@pytest.mark.django_db
def test_every_post_form_carries_the_csrf_token(superuser_client, site):
    owner_client = Client()
    owner_client.force_login(site["conversation"].owner)
    pages = [
        (owner_client, "/"),
        (owner_client, f"/c/{site['conversation'].pk}/"),
        (owner_client, "/history/"),
        (Client(), "/login/"),
        (Client(), "/admin/login/"),
        *((superuser_client, url) for url in admin_pages(site)),
    ]
    forms = 0
    for client, url in pages:
        page = scan(client.get(url, follow=True))
        for form in page.post_forms:
            # A plain form posts its hidden token; an htmx form sends the X-CSRFToken header
            # that the page's <body hx-headers> gives every htmx request.
            assert form["csrf"] or (form["htmx"] and page.body_csrf_header), (url, form)
            forms += 1
    assert forms >= 10


def _views(patterns, prefix: str = ""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _views(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern.callback


def test_no_view_skips_the_csrf_check_unless_it_does_its_own():
    """csrf_exempt only on the API: DRF's views (SessionAuthentication checks the token of a
    session request; a token request needs none) and POST /api/chat (chat.api.authentication
    does the same check); and the admin's upload, exempt only so that its size-limiting upload
    handler is installed before the body is read, which then checks the token itself
    (tests/knowledge/test_admin_upload_limits.py proves the check); and the OpenAI-compatible
    API under v1/, which reads an API token only, never the session (the next test)."""
    checks_its_own = {"admin/knowledge/document/add/"}
    exempt = [
        route
        for route, view in _views(get_resolver().url_patterns)
        if getattr(view, "csrf_exempt", False)
    ]
    assert exempt and all(
        route.startswith(("api/", "v1/")) or route in checks_its_own for route in exempt
    ), exempt


@pytest.mark.django_db(transaction=True)  # the API's async views close their connections
def test_the_openai_api_ignores_a_signed_in_session(staff_user):
    """v1/ is exempt from the CSRF check because a browser's session never answers there: a
    signed-in staff member's cookie without an API token gets 401, as a stranger does."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff_user)
    body = {"model": "sourced", "messages": [{"role": "user", "content": "Annual leave?"}]}
    for response in (
        client.get("/v1/models"),
        client.post("/v1/chat/completions", body, content_type="application/json"),
    ):
        assert response.status_code == 401, response.content
        assert response.json()["error"]["type"] == "authentication_error"


@pytest.mark.django_db
def test_state_changing_requests_without_the_token_are_refused(site):
    conversation, answer = site["conversation"], site["answer"]
    client = Client(enforce_csrf_checks=True)
    client.force_login(conversation.owner)
    for url, data in [
        (f"/c/{conversation.pk}/rename/", {"title": "Hijacked", "place": "header"}),
        (f"/c/{conversation.pk}/delete/", {}),
        (f"/messages/{answer.pk}/feedback/", {"rating": "-1"}),
        ("/logout/", {}),
    ]:
        assert client.post(url, data).status_code == 403, url
    api = client.patch(
        f"/api/conversations/{conversation.pk}", {"title": "Hijacked"}, "application/json"
    )
    assert api.status_code == 403 and api.json()["error"]["code"] == "forbidden"
    # POST /api/chat over a session: test_api.py::test_chat_with_a_session_needs_the_csrf_token
    login = Client(enforce_csrf_checks=True).post("/login/", {"username": "owner", "password": "x"})
    assert login.status_code == 403
    conversation.refresh_from_db()
    assert conversation.title == "Leave"
    assert Feedback.objects.get().rating == Feedback.Rating.UP

    # With the token the same rename goes through.
    page = client.get(f"/c/{conversation.pk}/")
    token = page.cookies["csrftoken"].value
    renamed = client.post(
        f"/c/{conversation.pk}/rename/",
        {"title": "Annual leave", "place": "header"},
        headers={"X-CSRFToken": token, "HX-Request": "true"},
    )
    assert renamed.status_code == 200
    conversation.refresh_from_db()
    assert conversation.title == "Annual leave"


# --- Production settings --------------------------------------------------------------------------
def _manage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    from django.db import connection

    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")},
        "DATABASE_URL": database_url_of(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        **env,
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


PRINT_SETTINGS = (
    "from django.conf import settings as s; print(s.DEBUG, s.SESSION_COOKIE_SECURE, "
    "s.CSRF_COOKIE_SECURE, s.SECURE_SSL_REDIRECT, s.SECURE_PROXY_SSL_HEADER, "
    "s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD)"
)


def test_check_deploy_is_clean_under_the_documented_production_settings():
    env = {**PRODUCTION_ENV, "DJANGO_SECRET_KEY": secrets.token_urlsafe(60)}
    result = _manage(["check", "--deploy", "--fail-level", "WARNING"], env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert "WARNINGS" not in result.stdout + result.stderr

    shown = _manage(["shell", "-c", PRINT_SETTINGS], env).stdout.strip().splitlines()[-1]
    assert shown == "False True True True ('HTTP_X_FORWARDED_PROTO', 'https') 31536000 True True"


def test_local_http_settings_keep_cookies_plain_and_never_redirect():
    """`make run` serves http://127.0.0.1:8000: nothing secure-only there (and check --deploy
    says so, which is what it is for)."""
    shown = _manage(["shell", "-c", PRINT_SETTINGS], {}).stdout.strip().splitlines()[-1]
    assert shown == "False False False False None 0 False False"
    warned = _manage(["check", "--deploy"], {"DJANGO_SECRET_KEY": secrets.token_urlsafe(60)})
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in warned.stdout + warned.stderr


@pytest.mark.django_db(transaction=True)
def test_behind_the_https_proxy_cookies_are_secure_and_http_is_redirected():
    """A real server started with the documented production environment (DJANGO_SECURE=1), as
    a proxy terminating TLS would reach it: the wiring from the variable to the behaviour."""
    env = {**PRODUCTION_ENV, "DJANGO_SECRET_KEY": secrets.token_urlsafe(60)}
    host = {"Host": "sourced.example.org"}
    with daphne_server(database_url_of(connection.settings_dict), env=env) as url:
        plain = httpx.get(f"{url}/login/", headers=host, timeout=30)
        secure = httpx.get(
            f"{url}/login/", headers={**host, "X-Forwarded-Proto": "https"}, timeout=30
        )
    assert plain.status_code == 301
    assert plain.headers["Location"] == "https://sourced.example.org/login/"
    assert secure.status_code == 200
    assert secure.headers["Strict-Transport-Security"] == (
        "max-age=31536000; includeSubDomains; preload"
    )
    cookie = next(c for c in secure.headers.get_list("Set-Cookie") if c.startswith("csrftoken="))
    assert "; Secure" in cookie
