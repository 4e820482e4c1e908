"""A question that names two documents ("Compare inventory.xlsx and suppliers.csv"): searched
in each (chat/answering/search.py `_search_each_named`), answered from the best passages of
each, both cited; `searched_document` the first and `searched_documents` both in the `sources`
event, on the stored message, in the API and on the page."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from chat.answering.named_documents import NamedDocument, named_documents_find, question_about
from chat.models import Message
from knowledge.access import reader_for
from tests.support.answers import collect, event_types
from tests.support.clients import fragments_until_idle, send_payload, socket_for
from tests.support.knowledge_base import document_create

pytestmark = pytest.mark.django_db(transaction=True)

INVENTORY_TEXTS = [
    "Inventory: the warehouse holds 1,200 units of steel brackets and 300 units of copper "
    "fittings; stock is counted every Monday.",
    "Inventory reorder point: brackets are reordered when fewer than 200 units remain.",
]
SUPPLIERS_TEXTS = [
    "Suppliers: Northwind Metals supplies the steel brackets with a delivery lead time of 10 "
    "days; Contoso Copper supplies the copper fittings in 14 days.",
    "Suppliers are paid within 30 days of the invoice date.",
]
# A third document, closer in wording to the question than either named one.
OTHER_TEXTS = [
    "Compare prices: staff compare the prices of steel brackets and copper fittings with "
    "three quotes before ordering.",
]
QUESTION = "Compare inventory.xlsx and suppliers.csv: steel brackets and copper fittings"


@pytest.fixture
def files(db):
    return {
        "inventory": document_create(
            title="Inventory", texts=INVENTORY_TEXTS, source="uploads/inventory.xlsx"
        ),
        "suppliers": document_create(
            title="Suppliers", texts=SUPPLIERS_TEXTS, source="uploads/suppliers.csv"
        ),
        "other": document_create(title="Purchasing notes", texts=OTHER_TEXTS),
    }


def sources_of(events) -> dict:
    return next(e for e in events if e.type == "sources").data


def test_a_question_naming_two_files_names_both(files, staff_user):
    found = named_documents_find(QUESTION, reader=reader_for(staff_user))

    assert [d.id for d in found] == [files["inventory"].pk, files["suppliers"].pk]


async def test_two_named_files_are_both_searched_and_cited(files, staff_user):
    message_id = uuid.uuid4()
    events = await collect(user=staff_user, question=QUESTION, message_id=message_id)

    assert event_types(events)[-1] == "answer_end"
    sources = sources_of(events)
    cited = {c["document_id"] for c in sources["citations"]}
    assert cited == {files["inventory"].pk, files["suppliers"].pk}
    both = [
        {"id": files["inventory"].pk, "title": "Inventory"},
        {"id": files["suppliers"].pk, "title": "Suppliers"},
    ]
    assert sources["searched_document"] == both[0]
    assert sources["searched_documents"] == both
    answer = await Message.objects.aget(reply_to_id=message_id)
    assert answer.searched_document_id == files["inventory"].pk
    assert answer.searched_documents == both


def test_each_file_is_asked_the_question_without_the_other_names():
    inventory = NamedDocument(1, "Inventory", 1.0, span=(8, 17))
    suppliers = NamedDocument(2, "Suppliers", 1.0, span=(27, 36))
    question = "Compare inventory.xlsx and suppliers.csv: lead times"

    assert question_about(question, suppliers, [inventory, suppliers]) == (
        "Compare and suppliers: lead times"
    )
    assert question_about(question, inventory, [inventory, suppliers]) == (
        "Compare inventory and : lead times"
    )


async def test_two_named_files_holding_no_answer_are_refused(files, staff_user):
    question = "Compare inventory.xlsx and suppliers.csv on the parental leave entitlement"
    events = await collect(user=staff_user, question=question)

    assert event_types(events)[-1] == "refusal"


def test_history_replay_api_and_page_show_both_files(files, staff_user):
    client = Client()
    client.force_login(staff_user)
    conversation_id, message_id = uuid.uuid4(), uuid.uuid4()
    async_to_sync(collect)(
        user=staff_user, question=QUESTION, message_id=message_id, conversation_id=conversation_id
    )
    both = [
        {"id": files["inventory"].pk, "title": "Inventory"},
        {"id": files["suppliers"].pk, "title": "Suppliers"},
    ]

    replayed = async_to_sync(collect)(
        user=staff_user, question=QUESTION, message_id=message_id, conversation_id=conversation_id
    )
    assert sources_of(replayed)["searched_documents"] == both
    messages = client.get(f"/api/conversations/{conversation_id}/messages").json()["messages"]
    answer = next(m for m in messages if m["role"] == "assistant")
    assert answer["searched_document"] == both[0]
    assert answer["searched_documents"] == both
    assert next(m for m in messages if m["role"] == "user")["searched_documents"] == []
    page = client.get(f"/c/{conversation_id}/").content.decode()
    assert "Searched in: Inventory, Suppliers" in page


def test_the_api_stream_says_both_files(files, staff_user):
    client = Client()
    client.force_login(staff_user)
    response = client.post(
        "/api/chat",
        {"message": QUESTION, "message_id": str(uuid.uuid4()), "stream": False},
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["searched_document"]["id"] == files["inventory"].pk
    assert [d["id"] for d in body["searched_documents"]] == [
        files["inventory"].pk,
        files["suppliers"].pk,
    ]
    assert {c["document_id"] for c in body["citations"]} == {
        files["inventory"].pk,
        files["suppliers"].pk,
    }


async def test_the_websocket_shows_both_files(files, staff_user):
    communicator = await socket_for(staff_user, uuid.uuid4())
    await communicator.send_to(text_data=send_payload(QUESTION))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()

    sources = [f for f in fragments if "data-searched-document" in f]
    assert sources and "Searched in: Inventory, Suppliers" in sources[0]


async def test_the_other_clients_structured_answer_names_both_files(files, staff_user):
    """The OpenAI API's `sourced` field and MCP's `ask` result are folded from the same events
    (chat.clients.answers.AnswerFold): both files are named there too."""
    from chat.clients.answers import AnswerFold

    events = await collect(user=staff_user, question=QUESTION, message_id=uuid.uuid4())
    fold = AnswerFold()
    for event in events:
        fold.add(event)

    structured = fold.extension()
    assert structured["searched_document"]["id"] == files["inventory"].pk
    assert [d["id"] for d in structured["searched_documents"]] == [
        files["inventory"].pk,
        files["suppliers"].pk,
    ]
