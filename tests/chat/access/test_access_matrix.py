"""Who may do what to a conversation, over HTTP: every conversation page and API route ×
{anonymous, signed-in non-staff, another staff user, the owner} × {shared, private}, with the
exact status, and never a word of someone else's private conversation in any answer. (The
WebSocket: test_access_matrix_ws.py; documents and feedback: test_access_matrix_documents.py.)"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from chat.models import Conversation, Message

SECRET = "Zanzibar salary band"  # in the private conversation's title, question and answer

# (route name, request) → status per role, for a shared and a private conversation.
ROUTES = {
    "page": lambda c, ids: c.get(f"/c/{ids['conversation']}/"),
    "api detail": lambda c, ids: c.get(f"/api/conversations/{ids['conversation']}"),
    "api messages": lambda c, ids: c.get(f"/api/conversations/{ids['conversation']}/messages"),
    "api feedback": lambda c, ids: c.post(
        f"/api/messages/{ids['answer']}/feedback",
        json.dumps({"rating": "up"}),
        content_type="application/json",
    ),
    "page feedback": lambda c, ids: c.post(f"/messages/{ids['answer']}/feedback/", {"rating": 1}),
    "api rename": lambda c, ids: c.patch(
        f"/api/conversations/{ids['conversation']}",
        json.dumps({"title": "Renamed"}),
        content_type="application/json",
    ),
    "page rename": lambda c, ids: c.post(f"/c/{ids['conversation']}/rename/", {"title": "New"}),
}
ANONYMOUS = {name: 302 if not name.startswith("api") else 401 for name in ROUTES}
NON_STAFF = dict.fromkeys(ROUTES, 403)
OWNER = dict.fromkeys(ROUTES, 200)
OTHER_ON_SHARED = {**OWNER, "api rename": 403, "page rename": 403}  # read and rate, not change
# Someone else's private conversation: the page does not say it exists; the API says no.
OTHER_ON_PRIVATE = {**NON_STAFF, "page": 404, "page rename": 404}
EXPECTED = {
    ("anonymous", False): ANONYMOUS,
    ("anonymous", True): ANONYMOUS,
    ("non-staff", False): NON_STAFF,
    ("non-staff", True): NON_STAFF,
    ("other staff", False): OTHER_ON_SHARED,
    ("other staff", True): OTHER_ON_PRIVATE,
    ("owner", False): OWNER,
    ("owner", True): OWNER,
}


@pytest.fixture
def people(django_user_model, staff_user, other_staff_user):
    visitor = django_user_model.objects.create_user(username="visitor", password="pw-12345678")
    return {"anonymous": None, "non-staff": visitor, "other staff": other_staff_user,
            "owner": staff_user}  # fmt: skip


def conversation_of(owner, *, private: bool) -> dict[str, str]:
    words = SECRET if private else "Shared travel question"
    conversation = Conversation.objects.create(owner=owner, is_private=private, title=words)
    question = Message.objects.create(conversation=conversation, role="user", content=words)
    answer = Message.objects.create(
        conversation=conversation, role="assistant", content=f"{words}. [1]", reply_to=question
    )
    return {"conversation": str(conversation.pk), "answer": str(answer.pk)}


@pytest.mark.django_db
@pytest.mark.parametrize("private", [False, True], ids=["shared", "private"])
@pytest.mark.parametrize("role", ["anonymous", "non-staff", "other staff", "owner"])
def test_every_conversation_route_answers_each_role_with_the_exact_status(people, role, private):
    ids = conversation_of(people["owner"], private=private)
    client = Client()
    if people[role] is not None:
        client.force_login(people[role])

    statuses = {name: request(client, ids).status_code for name, request in ROUTES.items()}

    assert statuses == EXPECTED[(role, private)]


@pytest.mark.django_db
def test_another_users_private_conversation_leaks_nowhere(people):
    ids = conversation_of(people["owner"], private=True)
    client = Client()
    client.force_login(people["other staff"])

    answers = [request(client, ids) for request in ROUTES.values()]
    answers += [
        client.get("/"),
        client.get("/history/", {"q": "Zanzibar"}),
        client.get("/api/conversations"),
    ]

    for response in answers:
        body = response.content.decode()
        assert SECRET not in body, (response.request["PATH_INFO"], response.status_code)
        assert ids["conversation"] not in body or response.status_code in (403, 404)
    # And the owner does see it in the same places.
    client.force_login(people["owner"])
    assert SECRET in client.get("/history/", {"q": "Zanzibar"}).content.decode()
    assert SECRET in client.get("/api/conversations").content.decode()
