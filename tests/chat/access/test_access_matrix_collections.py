"""Who may read a restricted collection, on every surface of answers, search and documents: an
"HR only" collection readable by the HR group and one named user × {reader by group, reader by
user, staff who may not read it, document manager who may not read it, superuser, non-staff
member of the group, anonymous} × {POST /api/chat, the WebSocket, GET /api/search in each mode,
GET /api/documents, the document page, its original file, the settings dialog's document
list}. A reader gets the pay bands; everyone else gets exactly what they would get if the
collection did not exist (the same refusal, the same 404), and the restricted text appears in
no raw response body or socket frame they receive. Revocation takes effect on the next request.
(Shared conversations and their surfaces: the conversation tests of the read rule.)"""

from __future__ import annotations

import json
import re
import uuid

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Group, Permission
from django.test import AsyncClient, Client

from chat.answering.evidence import NO_EVIDENCE_REFUSAL
from knowledge.access import reader_for
from knowledge.collections import collection_create
from knowledge.vocabulary import question_terms, vocabulary_get
from tests.support.clients import fragments_until_idle, send_payload, socket_for
from tests.support.knowledge_base import EXPENSES_TEXTS, LEAVE_TEXTS, document_create

PAY_BANDS = [
    "Grade 7 analysts are paid within the salary band of 41,200 to 48,900 pounds a year, "
    "reviewed every April by the Quarrington pay committee.",
    "Grade 8 senior analysts are paid within the salary band of 50,300 to 58,700 pounds a year.",
]
PAY_TITLE = "Pay bands 2026"
QUESTION = "What is the salary band for a Grade 7 analyst?"
# Only the restricted document holds these: none may reach someone who may not read it.
SECRETS = ("48,900", "58,700", "Quarrington", PAY_TITLE)
READERS = ("reader by group", "reader by user", "superuser")
STAFF_ROLES = ("reader by group", "reader by user", "staff", "document manager", "superuser")
MODES = ("hybrid", "vector", "lexical")


@pytest.fixture
def people(django_user_model):
    hr = Group.objects.create(name="HR")
    by_group = django_user_model.objects.create_user("hr-member", password="x", is_staff=True)
    by_group.groups.add(hr)
    by_user = django_user_model.objects.create_user("named-reader", password="x", is_staff=True)
    staff = django_user_model.objects.create_user("plain-staff", password="x", is_staff=True)
    manager = django_user_model.objects.create_user("manager", password="x", is_staff=True)
    manager.user_permissions.add(
        Permission.objects.get(codename="view_document"),
        Permission.objects.get(codename="change_document"),
    )
    root = django_user_model.objects.create_superuser("root", email="", password=None)
    visitor = django_user_model.objects.create_user("visitor", password="x")  # not staff
    visitor.groups.add(hr)
    return {
        "hr": hr,
        "roles": {
            "reader by group": by_group,
            "reader by user": by_user,
            "staff": staff,
            "document manager": manager,
            "superuser": root,
            "non-staff": visitor,
            "anonymous": None,
        },
    }


@pytest.fixture
def knowledge(people):
    """General holds the handbook and the expenses policy; "HR only" the pay bands."""
    collection = collection_create(
        name="HR only", groups=[people["hr"]], users=[people["roles"]["reader by user"]]
    )
    handbook = document_create(title="Staff handbook", texts=LEAVE_TEXTS)
    expenses = document_create(title="Expenses policy", texts=EXPENSES_TEXTS)
    pay = document_create(title=PAY_TITLE, texts=PAY_BANDS, collection=collection)
    return {"collection": collection, "handbook": handbook, "expenses": expenses, "pay": pay}


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def without_csrf(response) -> str:
    body = response.content.decode()
    return re.sub(r'("X-CSRFToken": "|name="csrfmiddlewaretoken" value=")[^"]+', r"\1", body)


def assert_no_secret(body: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in body, (where, secret)


def assert_refused_over_the_socket(frames: str, where: str) -> None:
    """The frames hold the standard refusal (HTML-escaped or not) and nothing restricted."""
    assert "I don&#x27;t have enough information" in frames or (
        "I don't have enough information" in frames
    ), where
    assert_no_secret(frames, where)


# --- Search and documents ----------------------------------------------------------------------
@pytest.mark.django_db
@pytest.mark.parametrize("mode", MODES)
def test_search_finds_the_restricted_document_only_for_its_readers(people, knowledge, mode):
    for role, user in people["roles"].items():
        response = client_for(user).get("/api/search", {"q": QUESTION, "mode": mode, "top_k": 20})
        body = response.content.decode()
        if role in ("anonymous", "non-staff"):
            assert response.status_code == (401 if user is None else 403), role
            assert_no_secret(body, role)
            continue
        assert response.status_code == 200, role
        documents = {result["document_id"] for result in response.json()["results"]}
        if role in READERS:
            assert knowledge["pay"].pk in documents, (role, mode)
            assert "48,900" in body, (role, mode)
        else:
            assert knowledge["pay"].pk not in documents, (role, mode)
            assert_no_secret(body, f"{role} {mode}")


@pytest.mark.django_db
def test_the_document_list_and_the_settings_dialog_show_only_readable_documents(people, knowledge):
    for role, user in people["roles"].items():
        client = client_for(user)
        listing = client.get("/api/documents")
        options = client.get("/settings/documents/")
        if role in ("anonymous", "non-staff"):
            assert listing.status_code == (401 if user is None else 403), role
            assert options.status_code == (302 if user is None else 403), role
            for response in (listing, options):
                assert_no_secret(response.content.decode(), role)
            continue
        assert (listing.status_code, options.status_code) == (200, 200), role
        listed = {d["title"]: d["collection"] for d in listing.json()["documents"]}
        general = {"Staff handbook": "General", "Expenses policy": "General"}
        if role in READERS:
            assert listed == {**general, PAY_TITLE: "HR only"}, role
            assert PAY_TITLE in options.content.decode(), role
        else:
            assert listed == general, role
            assert_no_secret(listing.content.decode(), role)
            assert_no_secret(options.content.decode(), role)
            assert "Staff handbook" in options.content.decode(), role


@pytest.mark.django_db
@pytest.mark.parametrize("route", ["", "file/"])
def test_the_document_page_and_file_of_a_restricted_document_are_not_found_for_non_readers(
    people, knowledge, tmp_path, route
):
    original = tmp_path / "pay-bands.md"
    original.write_text("# Pay bands\n\n" + "\n\n".join(PAY_BANDS) + "\n")
    pay = knowledge["pay"]
    pay.source = str(original)
    pay.save(update_fields=["source"])
    missing = pay.pk + 1000
    for role, user in people["roles"].items():
        client = client_for(user)
        response = client.get(f"/documents/{pay.pk}/{route}")
        if role in ("anonymous", "non-staff"):
            assert response.status_code == (302 if user is None else 403), role
            assert_no_secret(response.content.decode(), role)
            continue
        if role in READERS:
            assert response.status_code == 200, role
            body = (b"".join(response.streaming_content) if route else response.content).decode()
            assert "48,900" in body, role
            continue
        nonexistent = client.get(f"/documents/{missing}/{route}")
        assert response.status_code == nonexistent.status_code == 404, role
        # Exactly the page of an id that names no document (but for the per-response CSRF
        # token's masking).
        assert without_csrf(response) == without_csrf(nonexistent), role
        assert_no_secret(response.content.decode(), role)


# --- Answers -----------------------------------------------------------------------------------
async def chat_over_api(user, question: str, **fields) -> tuple[int, str]:
    client = AsyncClient()
    if user is not None:
        await client.aforce_login(user)
    body = {"message": question, "message_id": str(uuid.uuid4()), **fields}
    response = await client.post("/api/chat", json.dumps(body), "application/json")
    if response.streaming:
        return response.status_code, b"".join(
            [part async for part in response.streaming_content]
        ).decode()
    return response.status_code, response.content.decode()


@pytest.mark.django_db(transaction=True)
async def test_api_chat_answers_readers_and_refuses_everyone_else_in_the_standard_words(
    people, knowledge
):
    roles = people["roles"]
    for role, user in roles.items():
        status, body = await chat_over_api(user, QUESTION)
        if role in ("anonymous", "non-staff"):
            assert status == (401 if user is None else 403), role
            assert_no_secret(body, role)
        elif role in READERS:
            assert status == 200, role
            assert "event: answer_start" in body and "48,900" in body, role
        else:
            assert status == 200, role
            refusal = json.loads(body)
            assert refusal["type"] == "refusal", role
            assert refusal["message"] == NO_EVIDENCE_REFUSAL.message, role
            assert refusal["suggestions"] == NO_EVIDENCE_REFUSAL.suggestions, role
            assert_no_secret(body, role)
    # The same words as a question nothing answers, asked by the same person.
    status, body = await chat_over_api(roles["staff"], "Who won the 1966 world cup?")
    assert status == 200 and json.loads(body)["message"] == NO_EVIDENCE_REFUSAL.message


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("role", STAFF_ROLES)
async def test_the_websocket_answers_readers_and_refuses_everyone_else(people, knowledge, role):
    user = people["roles"][role]
    communicator = await socket_for(user, uuid.uuid4())
    try:
        await communicator.send_to(text_data=send_payload(QUESTION))
        frames = "".join(await fragments_until_idle(communicator, timeout=60))
    finally:
        await communicator.disconnect()
    if role in READERS:
        assert "48,900" in frames
    else:
        assert_refused_over_the_socket(frames, role)


@pytest.mark.django_db(transaction=True)
async def test_a_document_filter_naming_a_restricted_document_is_an_unknown_id(people, knowledge):
    pay = knowledge["pay"]
    staff = people["roles"]["staff"]
    status, body = await chat_over_api(staff, QUESTION, document_ids=[pay.pk])
    nonexistent_status, nonexistent = await chat_over_api(
        staff, QUESTION, document_ids=[pay.pk + 1000]
    )
    assert status == nonexistent_status == 404
    assert json.loads(body)["error"]["message"] == f"Unknown document ids: {pay.pk}."
    assert json.loads(nonexistent)["error"]["message"] == f"Unknown document ids: {pay.pk + 1000}."
    status, body = await chat_over_api(
        people["roles"]["reader by group"], QUESTION, document_ids=[pay.pk]
    )
    assert status == 200 and "48,900" in body


# --- Revocation --------------------------------------------------------------------------------
@pytest.mark.django_db
def test_a_reader_removed_from_the_group_loses_access_on_the_next_request(people, knowledge):
    member = people["roles"]["reader by group"]
    client = client_for(member)
    search = {"q": QUESTION, "mode": "hybrid", "top_k": 20}
    assert "48,900" in client.get("/api/search", search).content.decode()
    assert client.get(f"/documents/{knowledge['pay'].pk}/").status_code == 200

    member.groups.remove(people["hr"])

    assert_no_secret(client.get("/api/search", search).content.decode(), "revoked")
    assert client.get(f"/documents/{knowledge['pay'].pk}/").status_code == 404
    assert PAY_TITLE not in client.get("/api/documents").content.decode()


@pytest.mark.django_db(transaction=True)
async def test_a_reader_removed_from_the_group_regenerates_their_answer_to_a_refusal(
    people, knowledge
):
    """Regenerate searches for the asker as they are now: once out of the group, their own
    question about the restricted document is refused in the standard words, and no frame
    they receive holds anything of it (not even the answer being replaced)."""
    member = people["roles"]["reader by group"]
    question_id = str(uuid.uuid4())
    communicator = await socket_for(member, uuid.uuid4())
    try:
        await communicator.send_to(text_data=send_payload(QUESTION, message_id=question_id))
        answered = "".join(await fragments_until_idle(communicator, timeout=60))
        await sync_to_async(member.groups.remove)(people["hr"])
        regenerate = {"action": "regenerate", "message_id": question_id}
        await communicator.send_to(text_data=json.dumps(regenerate))
        regenerated = "".join(await fragments_until_idle(communicator, timeout=60))
    finally:
        await communicator.disconnect()

    assert "48,900" in answered
    assert_refused_over_the_socket(regenerated, "regenerated after removal")


@pytest.mark.django_db
def test_a_document_moved_out_of_general_leaves_the_search_of_staff_at_once(people, knowledge):
    client = client_for(people["roles"]["staff"])
    search = {"q": "annual leave days", "mode": "lexical", "top_k": 20}
    handbook = knowledge["handbook"]
    found = {r["document_id"] for r in client.get("/api/search", search).json()["results"]}
    assert handbook.pk in found

    handbook.collection = knowledge["collection"]
    handbook.save(update_fields=["collection"])

    found = {r["document_id"] for r in client.get("/api/search", search).json()["results"]}
    assert handbook.pk not in found


# --- The evidence check's statistics -----------------------------------------------------------
@pytest.mark.django_db
def test_a_spelling_correction_never_names_a_word_only_unreadable_documents_hold(people, knowledge):
    question = "Who sits on the Quarringtn committee?"  # a typo of the restricted-only word
    staff = reader_for(people["roles"]["staff"])
    member = reader_for(people["roles"]["reader by group"])

    staff_terms = {t.token: t for t in question_terms(question, reader=staff).terms}
    member_terms = {t.token: t for t in question_terms(question, reader=member).terms}

    assert member_terms["Quarringtn"].near == "quarrington"  # the reader's vocabulary has it
    assert staff_terms["Quarringtn"].near is None
    staff_vocabulary = vocabulary_get(reader=staff)
    assert not staff_vocabulary.knows("quarrington")
    assert staff_vocabulary.frequency("analyst") == 0  # its frequency is not counted either
    assert vocabulary_get(reader=member).frequency("analyst") == 2


@pytest.mark.django_db
def test_a_question_about_a_restricted_word_is_unknown_to_those_who_may_not_read_it(
    people, knowledge
):
    staff = reader_for(people["roles"]["staff"])
    member = reader_for(people["roles"]["reader by group"])
    question = "What does the Quarrington pay committee review?"

    staff_unknown = [t.token for t in question_terms(question, reader=staff).unknown]
    member_unknown = [t.token for t in question_terms(question, reader=member).unknown]

    assert "Quarrington" in staff_unknown  # exactly as if the document did not exist
    assert "Quarrington" not in member_unknown
    # The same for someone who reads nothing at all: nothing is known.
    nobody = reader_for(people["roles"]["non-staff"])
    assert vocabulary_get(reader=nobody).chunk_count == 0
