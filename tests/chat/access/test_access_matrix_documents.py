"""Who may see which document, and whose feedback: the document page, its file, /api/documents
and /api/search × {anonymous, signed-in non-staff, staff, staff who manage documents,
superuser} × {enabled, disabled document}; feedback given (page and API) and read (the admin)
× {anonymous, non-staff, other staff, owner, superuser} × {shared, private conversation}.
Exact statuses, and never a disabled document's text or another user's private feedback in
any list or search result. (Conversation routes: test_access_matrix.py; the WebSocket:
test_access_matrix_ws.py.)"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from chat.models import Conversation, Feedback, Message
from tests.support.knowledge_base import document_create

ENABLED_TEXT = "Lighthouse keepers wind the clockwork of the Fresnel lens every four hours."
DISABLED_TEXT = "Lighthouse keepers earn the Quillfeather bonus after ten winters on the rock."
SEARCH = "/api/search?q=lighthouse+keepers+clockwork+bonus&top_k=10"


@pytest.fixture
def readers(django_user_model, staff_user):
    """One user per kind of reader of documents (None: not signed in)."""
    visitor = django_user_model.objects.create_user(username="visitor")
    manager = django_user_model.objects.create_user(username="manager", is_staff=True)
    manager.user_permissions.add(Permission.objects.get(codename="view_document"))
    root = django_user_model.objects.create_superuser(username="root", email="", password=None)
    return {
        "anonymous": None,
        "non-staff": visitor,
        "staff": staff_user,
        "document manager": manager,
        "superuser": root,
    }


@pytest.fixture
def documents(tmp_path):
    """An enabled and a disabled document, each with its original file on disk."""
    made = {}
    for name, text, enabled in (
        ("enabled", ENABLED_TEXT, True),
        ("disabled", DISABLED_TEXT, False),
    ):
        document = document_create(title=f"Keepers ({name})", texts=[text], enabled=enabled)
        original = tmp_path / f"keepers-{name}.md"
        original.write_text(f"# Keepers\n\n{text}\n")
        document.source = str(original)
        document.save(update_fields=["source"])
        made[name] = document
    return made


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


DOCUMENT_ROUTES = {
    "page": lambda c, d: c.get(f"/documents/{d.pk}/"),
    "file": lambda c, d: c.get(f"/documents/{d.pk}/file/"),
}
PAGE = {"anonymous": 302, "non-staff": 403, "staff": 200, "document manager": 200,
        "superuser": 200}  # fmt: skip
# A disabled document is out of the knowledge base: only those who manage documents open it.
PAGE_DISABLED = {**PAGE, "staff": 404}
API = {"anonymous": 401, "non-staff": 403, "staff": 200, "document manager": 200,
       "superuser": 200}  # fmt: skip


@pytest.mark.django_db
@pytest.mark.parametrize("state", ["enabled", "disabled"])
@pytest.mark.parametrize("route", sorted(DOCUMENT_ROUTES))
def test_document_page_and_file_answer_each_reader_with_the_exact_status(
    readers, documents, route, state
):
    expected = PAGE if state == "enabled" else PAGE_DISABLED
    statuses = {
        role: DOCUMENT_ROUTES[route](client_for(user), documents[state]).status_code
        for role, user in readers.items()
    }
    assert statuses == expected


@pytest.mark.django_db
def test_document_page_and_file_show_the_text_only_to_those_who_may_open_them(readers, documents):
    for role, user in readers.items():
        client = client_for(user)
        for state, text in (("enabled", ENABLED_TEXT), ("disabled", DISABLED_TEXT)):
            page = client.get(f"/documents/{documents[state].pk}/")
            file = client.get(f"/documents/{documents[state].pk}/file/")
            allowed = page.status_code == 200
            assert (text in page.content.decode()) == allowed, (role, state)
            assert file.status_code == page.status_code, (role, state)
            if file.status_code == 200:
                assert text in b"".join(file.streaming_content).decode(), (role, state)
            else:
                assert text not in file.content.decode(), (role, state)
            assert allowed == (
                role in ("staff", "document manager", "superuser")
                and (state == "enabled" or role != "staff")
            ), (role, state)


@pytest.mark.django_db
def test_document_list_and_search_answer_each_reader_and_never_search_disabled_text(
    readers, documents
):
    statuses, listed, found = {}, {}, {}
    for role, user in readers.items():
        client = client_for(user)
        listing, search = client.get("/api/documents"), client.get(SEARCH)
        statuses[role] = (listing.status_code, search.status_code)
        if listing.status_code == 200:
            listed[role] = {d["title"] for d in listing.json()["documents"]}
            found[role] = " ".join(r["text"] for r in search.json()["results"])
        else:  # the error envelope, and nothing of the documents
            for response in (listing, search):
                assert set(response.json()) == {"error"}
                assert "Keepers" not in response.content.decode()

    assert statuses == {role: (status, status) for role, status in API.items()}
    both = {"Keepers (enabled)", "Keepers (disabled)"}
    assert listed == {"staff": {"Keepers (enabled)"}, "document manager": both,
                      "superuser": both}  # fmt: skip
    for role, text in found.items():  # searched: only the knowledge base, for everyone
        assert ENABLED_TEXT in text, role
        assert "Quillfeather" not in text, role


# --- Feedback -------------------------------------------------------------------------------------
SECRET_COMMENT = "Quillfeather remark about my manager"


@pytest.fixture
def people(django_user_model, staff_user, other_staff_user):
    visitor = django_user_model.objects.create_user(username="visitor")
    root = django_user_model.objects.create_superuser(username="root", email="", password=None)
    for user in (staff_user, other_staff_user):  # both may read feedback in the admin
        user.user_permissions.add(Permission.objects.get(codename="view_feedback"))
    return {"anonymous": None, "non-staff": visitor, "other staff": other_staff_user,
            "owner": staff_user, "superuser": root}  # fmt: skip


def exchange_of(owner, *, private: bool) -> dict[str, str]:
    conversation = Conversation.objects.create(
        owner=owner, is_private=private, title="Private one" if private else "Shared one"
    )
    question = Message.objects.create(conversation=conversation, role="user", content="Leave?")
    answer = Message.objects.create(
        conversation=conversation, role="assistant", content="25 days. [1]", reply_to=question
    )
    return {"conversation": str(conversation.pk), "question": str(question.pk),
            "answer": str(answer.pk)}  # fmt: skip


FEEDBACK_ROUTES = {
    "api": lambda c, m: c.post(
        f"/api/messages/{m}/feedback",
        json.dumps({"rating": "down", "comment": "not helpful"}),
        content_type="application/json",
    ),
    "page": lambda c, m: c.post(f"/messages/{m}/feedback/", {"rating": -1}),
}
GIVE = {
    # (role, private) → (api, page) on the answer
    ("anonymous", False): (401, 302),
    ("anonymous", True): (401, 302),
    ("non-staff", False): (403, 403),
    ("non-staff", True): (403, 403),
    ("other staff", False): (200, 200),  # anyone who may read a shared answer may rate it
    ("other staff", True): (403, 403),
    ("owner", False): (200, 200),
    ("owner", True): (200, 200),
    ("superuser", False): (200, 200),
    ("superuser", True): (403, 403),  # the chat's rule: private is private, even to root
}


@pytest.mark.django_db
@pytest.mark.parametrize("private", [False, True], ids=["shared", "private"])
@pytest.mark.parametrize("role", ["anonymous", "non-staff", "other staff", "owner", "superuser"])
def test_feedback_is_given_with_the_exact_status(people, role, private):
    ids = exchange_of(people["owner"], private=private)
    client = client_for(people[role])

    statuses = tuple(FEEDBACK_ROUTES[r](client, ids["answer"]).status_code for r in ("api", "page"))

    assert statuses == GIVE[(role, private)]
    may = GIVE[(role, private)] == (200, 200)
    assert Feedback.objects.filter(message_id=ids["answer"]).count() == (1 if may else 0)
    # Feedback is on answers only: on a question it is a clear 4xx, never stored.
    if may:
        assert FEEDBACK_ROUTES["api"](client, ids["question"]).status_code == 404
        assert FEEDBACK_ROUTES["page"](client, ids["question"]).status_code == 404
        assert not Feedback.objects.filter(message_id=ids["question"]).exists()


@pytest.mark.django_db
def test_feedback_is_read_only_by_its_giver_in_the_chat_and_by_policy_in_the_admin(people):
    shared = exchange_of(people["owner"], private=False)
    private = exchange_of(people["owner"], private=True)
    owner = client_for(people["owner"])
    for ids in (shared, private):
        response = owner.post(
            f"/api/messages/{ids['answer']}/feedback",
            json.dumps({"rating": "down", "comment": SECRET_COMMENT}),
            content_type="application/json",
        )
        assert response.status_code == 200

    # In the chat a rating shows only to whoever gave it: the owner's thumbs down is pressed
    # on the owner's page, not on another staff user's view of the same shared conversation.
    pressed = 'aria-label="Unhelpful answer" aria-pressed="true"'
    assert pressed in owner.get(f"/c/{shared['conversation']}/").content.decode()
    other = client_for(people["other staff"])
    other_page = other.get(f"/c/{shared['conversation']}/").content.decode()
    assert other_page.count('aria-pressed="true"') == 0
    for path in (f"/c/{shared['conversation']}/", f"/api/conversations/{shared['conversation']}"
                 "/messages", "/history/?q=Quillfeather", "/api/conversations"):  # fmt: skip
        assert SECRET_COMMENT not in other.get(path).content.decode(), path

    # The admin's feedback list (unhelpful ratings by default) and pages: a staff user with the
    # view permission sees the feedback of shared conversations only; the owner and superusers
    # see the private one too.
    changelist = "/admin/chat/feedback/"
    private_feedback = Feedback.objects.get(message_id=private["answer"])
    shared_feedback = Feedback.objects.get(message_id=shared["answer"])
    expected = {
        # role → (list status, comment rows listed, shared page, private page)
        "anonymous": (302, 0, 302, 302),
        "non-staff": (302, 0, 302, 302),
        "other staff": (200, 1, 200, 302),
        "owner": (200, 2, 200, 200),
        "superuser": (200, 2, 200, 200),
    }
    for role, (status, rows, shared_status, private_status) in expected.items():
        client = client_for(people[role])
        listing = client.get(changelist, {"q": "Quillfeather"})
        assert listing.status_code == status, role
        if status == 200:
            assert listing.context["cl"].result_count == rows, role
        shared_page = client.get(f"{changelist}{shared_feedback.pk}/change/")
        private_page = client.get(f"{changelist}{private_feedback.pk}/change/")
        assert (shared_page.status_code, private_page.status_code) == (
            shared_status,
            private_status,
        ), role
        if private_page.status_code == 302 and role == "other staff":
            # the admin says the object does not exist: nothing of it shows
            assert SECRET_COMMENT not in client.get(private_page.url).content.decode()
