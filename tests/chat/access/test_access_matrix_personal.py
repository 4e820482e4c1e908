"""A personal file (docs/decisions/0081-personal-files.md) × who opens it: its owner, other
staff (in the owner's group too), a superuser, a document manager, non-staff and anonymous
visitors × every surface that shows document text: the shared conversation's page (hover
cards, sources), the messages API, history search, feedback, the replayed answer, the
document page and its original file, `/api/documents`, `/api/search` in its three modes,
retrieval, and the admin. Only the owner ever receives the file's text: raw bodies are
searched for it. The WebSocket: test_access_matrix_personal_ws.py."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.core.files.base import ContentFile
from django.db import connection
from django.test import Client

from chat.models import Conversation, Feedback
from chat.withheld import Withheld, messages_withheld
from knowledge.access import (
    OPERATOR,
    document_readable,
    documents_readable,
    documents_readable_filter,
    readable_document_row_sql,
    reader_for,
    reader_searching,
)
from knowledge.models import Chunk, Embedding
from knowledge.retrieval import chunks_search
from knowledge.vocabulary import vocabulary_get
from tests.support.conversations import exchange_create
from tests.support.knowledge_base import document_create
from tests.support.personal import personal_file_create
from tests.support.readers import readers_create

pytestmark = pytest.mark.django_db

QUESTION = "What does my offer letter say about the signing bonus?"
FILE_CHUNK = "The Zanzibarine signing bonus of 7,250 pounds is paid after the probation period."
FILE_ANSWER = "Your offer letter says the Zanzibarine signing bonus is 7,250 pounds. [1]"
SECRET = "Zanzibarine"  # in the file and the answer only: never in the question or title
OPEN_QUESTION = "How often is the lens wound?"
OPEN_CHUNK = "Keepers wind the Tidewater lens clockwork every four hours."
OPEN_ANSWER = "The Tidewater lens is wound every four hours. [1]"
ACCESS_NOTICE = Withheld.ACCESS.notice

ROLES = ["asker", "reader by group", "staff", "superuser", "document manager", "non-staff",
         "anonymous"]  # fmt: skip
READS = {"asker"}  # the file's owner, and nobody else


@pytest.fixture
def people(db):
    return readers_create()


@pytest.fixture
def shared(people):
    """A shared conversation of the asker, their file attached to it: an answer citing the
    file, then one citing General."""
    conversation = Conversation.objects.create(
        owner=people["asker"], is_private=False, title=QUESTION
    )
    offer = personal_file_create(
        people["asker"], title="offer.pdf", texts=[FILE_CHUNK], conversation=conversation
    )
    offer.file.save("personal/test/offer.txt", ContentFile(FILE_CHUNK.encode()))
    keepers = document_create(title="Keepers", texts=[OPEN_CHUNK])
    question, answer = exchange_create(
        conversation, question=QUESTION, answer=FILE_ANSWER, cited=list(offer.chunks.all())
    )
    _, open_answer = exchange_create(
        conversation, question=OPEN_QUESTION, answer=OPEN_ANSWER, cited=list(keepers.chunks.all())
    )
    return {"conversation": conversation, "question": question, "answer": answer,
            "open_answer": open_answer, "file": offer}  # fmt: skip


def client_for(user) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


PAGE = {"non-staff": 403, "anonymous": 302}
API = {"non-staff": 403, "anonymous": 401}


# --- The rule itself ----------------------------------------------------------------------------
@pytest.mark.parametrize("role", ROLES)
def test_only_the_owner_reads_the_file_by_the_rule_in_each_of_its_forms(people, shared, role):
    reader = reader_for(people[role])
    offer = shared["file"]
    reads = role in READS

    assert document_readable(user=reader, document=offer) == reads
    assert documents_readable(user=reader).filter(pk=offer.pk).exists() == reads
    assert Chunk.objects.filter(document=offer).exists()  # the file has text to leak
    chunks = Chunk.objects.filter(documents_readable_filter(user=reader, prefix="document__"))
    assert chunks.filter(document=offer).exists() == reads
    rows = Embedding.objects.filter(
        documents_readable_filter(
            user=reader, prefix="document__", collection_field="collection_id"
        )
    )
    assert rows.filter(document_id=offer.pk).exists() == reads
    condition, params = readable_document_row_sql(user=reader, alias="d")
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT d.id FROM knowledge_document d WHERE {condition}", params)
        assert (offer.pk in {pk for (pk,) in cursor.fetchall()}) == reads


def test_the_operators_tools_and_the_shared_vocabulary_never_hold_the_file(people, shared):
    result = chunks_search(query="Zanzibarine signing bonus", reader=OPERATOR, top_k=20)
    assert all(SECRET not in chunk.text for chunk in result.chunks)
    assert vocabulary_get(reader=OPERATOR).frequency("zanzibarin") == 0
    superuser = reader_for(people["superuser"])
    assert vocabulary_get(reader=superuser).frequency("zanzibarin") == 0


@pytest.mark.parametrize("mode", ["hybrid", "vector", "lexical"])
def test_retrieval_searches_the_file_only_for_its_owner_and_only_where_attached(
    people, shared, mode
):
    query = "Zanzibarine signing bonus after probation"
    offer = shared["file"]
    owner = reader_for(people["asker"])

    def found(reader) -> bool:
        result = chunks_search(query=query, reader=reader, top_k=20, mode=mode)
        return any(chunk.document_id == offer.pk for chunk in result.chunks)

    assert found(reader_searching(owner, file_ids=[offer.pk]))  # its conversation
    assert not found(owner)  # anywhere else: another conversation, /api/search
    for role in ("reader by group", "staff", "superuser", "document manager"):
        someone = reader_for(people[role])
        # Naming the owner's file does not make anyone else search it.
        assert not found(reader_searching(someone, file_ids=[offer.pk])), role


# --- The shared conversation --------------------------------------------------------------------
@pytest.mark.parametrize("role", ROLES)
def test_the_shared_page_shows_the_answer_from_the_file_only_to_its_owner(people, shared, role):
    response = client_for(people[role]).get(f"/c/{shared['conversation'].pk}/")
    body = response.content.decode()

    assert response.status_code == PAGE.get(role, 200)
    assert (SECRET in body) == (role in READS)
    if response.status_code != 200:
        return
    assert QUESTION in body
    assert "Tidewater" in body
    if role in READS:
        assert FILE_CHUNK in body  # the hover card and the sources block
    else:
        assert ACCESS_NOTICE.replace("'", "&#x27;") in body
        assert "offer.pdf" not in body
        assert "7,250" not in body


@pytest.mark.parametrize("role", ROLES)
def test_the_messages_api_withholds_the_answer_from_all_but_the_owner(people, shared, role):
    response = client_for(people[role]).get(
        f"/api/conversations/{shared['conversation'].pk}/messages"
    )
    body = response.content.decode()

    assert response.status_code == API.get(role, 200)
    assert (SECRET in body) == (role in READS)
    if response.status_code != 200:
        return
    answer = {m["id"]: m for m in json.loads(body)["messages"]}[str(shared["answer"].pk)]
    if role in READS:
        assert answer["withheld"] == ""
        assert answer["citations"][0]["title"] == "offer.pdf"
    else:
        assert answer["content"] == ACCESS_NOTICE
        assert answer["citations"] == []
        assert answer["withheld"] == "access"
        assert "offer.pdf" not in body


@pytest.mark.parametrize("role", ROLES)
def test_history_search_matches_the_answer_only_for_the_owner(people, shared, role):
    response = client_for(people[role]).get("/history/", {"q": SECRET})
    body = response.content.decode()

    assert response.status_code == PAGE.get(role, 200)
    assert ("Zanzibarine signing bonus is 7,250" in body) == (role in READS)


@pytest.mark.parametrize("role", ["reader by group", "staff", "superuser", "document manager"])
def test_feedback_on_the_answer_is_refused_like_a_missing_message(people, shared, role):
    client = client_for(people[role])
    answer = shared["answer"].pk

    api = client.post(
        f"/api/messages/{answer}/feedback",
        json.dumps({"rating": "up"}),
        content_type="application/json",
    )
    html = client.post(f"/messages/{answer}/feedback/", {"rating": 1})

    assert (api.status_code, html.status_code) == (404, 404)
    assert not Feedback.objects.exists()


def test_the_owner_gives_feedback_on_the_answer(people, shared):
    response = client_for(people["asker"]).post(
        f"/api/messages/{shared['answer'].pk}/feedback",
        json.dumps({"rating": "up"}),
        content_type="application/json",
    )
    assert response.status_code in (200, 201)


@pytest.mark.parametrize("role", ROLES)
def test_a_replayed_answer_carries_the_file_only_for_its_owner(people, shared, role):
    from chat.answering.replay import stored_answer_events
    from chat.selectors import message_answer_with_citations

    answer = message_answer_with_citations(shared["answer"].pk)
    events = json.dumps([e.data for e in stored_answer_events(answer, user=people[role])])

    assert (SECRET in events) == (role in READS)
    assert ("offer.pdf" in events) == (role in READS)


def test_withheld_is_decided_for_a_superuser_too(people, shared):
    withheld = messages_withheld(
        user=people["superuser"], conversation_id=shared["conversation"].pk
    )
    assert withheld == {shared["answer"].pk: Withheld.ACCESS}
    assert messages_withheld(user=people["asker"], conversation_id=shared["conversation"].pk) == {}


# --- Documents ----------------------------------------------------------------------------------
DOCUMENT_PAGE = {"asker": 200, "non-staff": 403, "anonymous": 302}


@pytest.mark.parametrize("role", ROLES)
def test_the_document_page_and_file_open_for_the_owner_only(people, shared, role):
    client = client_for(people[role])
    offer = shared["file"]

    page = client.get(f"/documents/{offer.pk}/")
    file = client.get(f"/documents/{offer.pk}/file/")
    raw = b"".join(file.streaming_content) if file.streaming else file.content
    bodies = page.content.decode() + raw.decode(errors="replace")

    if role in READS:
        assert page.status_code == 200
        assert file.status_code == 200
        assert SECRET in bodies
    else:
        assert page.status_code in (302, 403, 404), role
        assert file.status_code in (302, 403, 404), role
        assert SECRET not in bodies
        assert "offer.pdf" not in bodies


@pytest.mark.parametrize("role", ROLES)
def test_the_document_list_and_search_never_show_the_file(people, shared, role):
    """`/api/documents` and the settings dialog's list name the organisation's documents only,
    and `/api/search` searches no personal file, not even for its owner (outside its
    conversation)."""
    client = client_for(people[role])
    settings_list = client.get("/settings/documents/")
    assert settings_list.status_code == PAGE.get(role, 200)
    assert "offer.pdf" not in settings_list.content.decode()
    for url in [
        "/api/documents",
        "/api/search?q=Zanzibarine+signing+bonus&mode=hybrid",
        "/api/search?q=Zanzibarine+signing+bonus&mode=vector",
        "/api/search?q=Zanzibarine+signing+bonus&mode=lexical",
    ]:
        response = client.get(url)
        body = response.content.decode()
        assert response.status_code == API.get(role, 200), url
        assert "offer.pdf" not in body, url
        assert SECRET not in body.replace("q=Zanzibarine", "").replace(
            '"query":"Zanzibarine', ""
        ).replace('"query": "Zanzibarine', ""), url


# --- The admin ----------------------------------------------------------------------------------
def _admin_body(client: Client, url: str) -> str:
    response = client.get(url, follow=True)
    assert response.status_code == 200, url
    return response.content.decode()


@pytest.mark.parametrize("role", ["superuser", "document manager", "staff"])
def test_the_admin_shows_no_text_of_the_file_to_anyone(people, shared, role):
    user = people[role]
    for codename in ("view_conversation", "view_message", "view_feedback", "view_chunk",
                     "view_document"):  # fmt: skip
        user.user_permissions.add(Permission.objects.get(codename=codename))
    Feedback.objects.create(user=people["asker"], message=shared["answer"], rating=1)
    client = client_for(user)
    offer = shared["file"]

    for url in [
        "/admin/knowledge/document/",
        f"/admin/knowledge/document/{offer.pk}/change/",
        "/admin/knowledge/chunk/",
        f"/admin/knowledge/chunk/?q={SECRET}",
        "/admin/chat/message/",
        f"/admin/chat/message/{shared['answer'].pk}/change/",
        f"/admin/chat/conversation/{shared['conversation'].pk}/change/",
        "/admin/chat/feedback/?rating=all",
    ]:
        body = _admin_body(client, url).replace(f"q={SECRET}", "").replace(f'value="{SECRET}"', "")
        assert SECRET not in body.replace(f"“{SECRET}”", ""), url


def test_the_superuser_sees_the_files_metadata_in_the_admin(people, shared):
    body = _admin_body(client_for(people["superuser"]), "/admin/knowledge/personalfile/")

    assert "offer.pdf" in body
    assert "asker" in body
    assert SECRET not in body


@pytest.mark.parametrize("role", ["document manager", "staff"])
def test_only_superusers_open_the_personal_files_admin(people, shared, role):
    user = people[role]
    user.user_permissions.add(Permission.objects.get(codename="view_document"))
    response = client_for(user).get("/admin/knowledge/personalfile/")

    assert response.status_code == 403
    assert "offer.pdf" not in response.content.decode()
