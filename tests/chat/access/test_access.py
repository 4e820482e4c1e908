"""Who sees what: one privacy rule for conversations (`conversation_access`), applied in the
admin too (superusers only see private conversations of others), documents as non-admin staff
see them (file names, no parser errors, no disabled documents), and page helpers that belong
to neither app."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.auth.models import Permission
from django.db import connection
from django.urls import reverse

from chat.models import Conversation, Feedback, Message
from chat.selectors import ConversationAccess, conversation_access
from knowledge.models import Document
from tests.support.conversations import exchange_create
from tests.support.knowledge_base import document_create
from tests.support.live_server import database_url_of

pytestmark = pytest.mark.django_db

SECRET = "Can I be dismissed for whistleblowing on my manager?"


def test_conversation_access_is_the_one_privacy_rule(staff_user, other_staff_user):
    shared = Conversation.objects.create(owner=staff_user, title="Shared")
    private = Conversation.objects.create(owner=staff_user, title="Mine", is_private=True)

    assert conversation_access(staff_user, shared) == ConversationAccess.OWNER
    assert conversation_access(staff_user, private) == ConversationAccess.OWNER
    assert conversation_access(other_staff_user, shared) == ConversationAccess.READ
    assert conversation_access(other_staff_user, private) == ConversationAccess.NONE


# --- The admin -----------------------------------------------------------------------------------
@pytest.fixture
def private_refusal(other_staff_user) -> Conversation:
    """Someone else's private conversation: a refused question, with feedback on it."""
    conversation = Conversation.objects.create(
        owner=other_staff_user, title=SECRET, is_private=True
    )
    _, answer = exchange_create(
        conversation,
        question=SECRET,
        answer="I don't have enough information to answer that question.",
        status=Message.Status.REFUSED,
    )
    Feedback.objects.create(user=other_staff_user, message=answer, rating=-1, comment=SECRET)
    return conversation


@pytest.fixture
def chat_admin(client, staff_user):
    """Staff allowed to view conversations, messages and feedback in the admin, not a
    superuser."""
    for codename in ("view_conversation", "view_message", "view_feedback"):
        staff_user.user_permissions.add(Permission.objects.get(codename=codename))
    client.force_login(staff_user)
    return client


ADMIN_PAGES = [
    "admin:chat_conversation_changelist",
    "admin:chat_message_changelist",
    "admin:chat_feedback_changelist",
    "admin:chat_message_unanswered",
]


@pytest.mark.parametrize("page", ADMIN_PAGES)
def test_staff_who_are_not_superusers_never_see_private_conversations_in_the_admin(
    chat_admin, private_refusal, page
):
    url = reverse(page) + ("?rating=all" if "feedback" in page else "")
    response = chat_admin.get(url)

    assert response.status_code == 200
    assert SECRET not in response.content.decode()
    change = reverse("admin:chat_conversation_change", args=[private_refusal.pk])
    assert SECRET not in chat_admin.get(change, follow=True).content.decode()


def test_their_own_private_and_shared_conversations_stay_visible_in_the_admin(
    chat_admin, staff_user, other_staff_user
):
    Conversation.objects.create(owner=staff_user, title="My own private one", is_private=True)
    Conversation.objects.create(owner=other_staff_user, title="A shared one")

    listing = chat_admin.get(reverse("admin:chat_conversation_changelist")).content.decode()

    assert "My own private one" in listing and "A shared one" in listing


@pytest.mark.parametrize("page", ADMIN_PAGES)
def test_superusers_see_every_conversation_in_the_admin(admin_client, private_refusal, page):
    url = reverse(page) + ("?rating=all" if "feedback" in page else "")
    assert SECRET in admin_client.get(url).content.decode()


# --- Documents as staff see them -----------------------------------------------------------------
@pytest.fixture
def documents(tmp_path) -> dict[str, Document]:
    path = tmp_path / "secret-folder" / "handbook.md"
    path.parent.mkdir()
    path.write_text("# Handbook\n\nAnnual leave is 25 days.\n")
    ready = document_create(title="Handbook", texts=["Annual leave is 25 days."])
    Document.objects.filter(pk=ready.pk).update(source=str(path))
    failed = Document.objects.create(
        title="Broken",
        source=str(tmp_path / "secret-folder" / "broken.docx"),
        status=Document.Status.FAILED,
        error="Could not read the Word document (BadZipFile: File is not a zip file).",
    )
    disabled = document_create(title="Old policy", texts=["Leave was 20 days."], enabled=False)
    return {"ready": ready, "failed": failed, "disabled": disabled}


def test_the_documents_api_shows_file_names_and_no_parser_errors_to_staff(
    client, staff_user, documents, tmp_path
):
    client.force_login(staff_user)

    body = client.get("/api/documents").json()

    by_title = {d["title"]: d for d in body["documents"]}
    # The disabled and the failed one are withdrawn: read only by those who manage documents
    # (knowledge/access.py), so neither is listed, nor anything of the parser's error.
    assert set(by_title) == {"Handbook"}
    assert by_title["Handbook"]["source"] == "handbook.md"
    assert str(tmp_path) not in json.dumps(body)
    assert "BadZipFile" not in json.dumps(body) and "broken.docx" not in json.dumps(body)


def test_staff_who_manage_documents_see_the_full_error_and_disabled_ones(
    client, staff_user, documents, tmp_path
):
    staff_user.user_permissions.add(Permission.objects.get(codename="view_document"))
    client.force_login(staff_user)

    body = client.get("/api/documents").json()

    by_title = {d["title"]: d for d in body["documents"]}
    assert set(by_title) == {"Handbook", "Broken", "Old policy"}
    assert "BadZipFile" in by_title["Broken"]["error"]
    assert str(tmp_path) not in json.dumps(body)  # a server path is nobody's business


def test_a_disabled_document_is_neither_viewable_nor_downloadable_by_staff(
    client, staff_user, documents, tmp_path
):
    disabled = documents["disabled"]
    path = tmp_path / "old-policy.md"
    path.write_text("Leave was 20 days.")
    Document.objects.filter(pk=disabled.pk).update(source=str(path))
    client.force_login(staff_user)

    page = client.get(reverse("knowledge:document", args=[disabled.pk]))
    download = client.get(reverse("knowledge:document_file", args=[disabled.pk]))

    assert page.status_code == 404 and "Leave was 20 days" not in page.content.decode()
    assert download.status_code == 404
    assert (
        client.get(reverse("knowledge:document", args=[documents["ready"].pk])).status_code == 200
    )

    staff_user.user_permissions.add(Permission.objects.get(codename="view_document"))
    assert client.get(reverse("knowledge:document", args=[disabled.pk])).status_code == 200
    assert client.get(reverse("knowledge:document_file", args=[disabled.pk])).status_code == 200


# --- Import structure ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("module", "must_not_load"),
    [
        (
            "knowledge.views",
            [
                "chat.views",
                "chat.presenters",
                "chat.fragments",
                "chat.page_parts",
                "chat.consumers",
            ],
        ),
        ("chat.presenters", ["knowledge.views"]),
        ("chat.fragments", ["knowledge.views"]),
        ("chat.page_parts", ["knowledge.views"]),
        ("chat.views", ["knowledge.views"]),
    ],
)
def test_the_document_pages_and_the_chat_pages_do_not_import_each_other(module, must_not_load):
    code = (
        "import django, json, sys; django.setup(); "
        f"import {module}; "
        f"print(json.dumps([m for m in {must_not_load!r} if m in sys.modules]))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=settings.BASE_DIR,
        env={
            **os.environ,
            "DATABASE_URL": database_url_of(connection.settings_dict),
            "DJANGO_SETTINGS_MODULE": "config.settings",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_the_pages_shared_by_both_apps_import_neither():
    """pages/ is what the chat and the document pages share: importing either app from it
    would make each depend on the other through it (the sidebar's reader is registered by
    the chat instead). The one exception is the read rule's staff check
    (`knowledge.access.user_is_staff`, which every surface asks), whose module imports
    neither the chat nor pages/, so nothing depends on the chat through it."""
    imported = set()
    for path in (settings.BASE_DIR / "pages").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
    apps = {name for name in imported if name.split(".")[0] in {"chat", "knowledge"}}
    assert apps <= {"knowledge.access"}
    rule = ast.parse((settings.BASE_DIR / "knowledge" / "access.py").read_text())
    rule_imports = {n.module for n in ast.walk(rule) if isinstance(n, ast.ImportFrom)}
    assert not {name for name in rule_imports if name and name.split(".")[0] in {"chat", "pages"}}
