"""A question that names a document, answered (chat/answering/search.py): searched in that
document first, everything the asker may read when it holds nothing, the refusal kept when
nothing does; the searched document in the `sources` event, on the stored message, its
replay, the API's messages, the WebSocket's fragments and the conversation page."""

from __future__ import annotations

import uuid

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.test import Client

from chat.answering.evidence import NO_EVIDENCE_MESSAGE
from chat.answering.request import AnswerOptions
from chat.models import Message
from knowledge.access import reader_for
from knowledge.collections import collection_create
from tests.support.answers import collect, event_types
from tests.support.clients import fragments_until_idle, send_payload, socket_for
from tests.support.knowledge_base import LEAVE_TEXTS, document_create
from tests.support.readers import readers_create

pytestmark = pytest.mark.django_db(transaction=True)

HANDBOOK_TEXTS = [
    *LEAVE_TEXTS,
    "How overtime is paid: overtime is paid at time and a half for every hour worked beyond "
    "37.5 hours a week.",
]
CONTRACTOR_TEXTS = [
    "Contractors invoice any overtime at their standard hourly rate; no overtime premium is "
    "paid to contractors.",
    "Contractors submit their timesheets every Friday before noon.",
]
BARE = "How is overtime paid?"
NAMED = "In the contractor guide, how is overtime paid?"


@pytest.fixture
def guides(db):
    return {
        "handbook": document_create(title="Staff handbook", texts=HANDBOOK_TEXTS),
        "contractors": document_create(title="Contractor guide", texts=CONTRACTOR_TEXTS),
    }


def sources_of(events) -> dict:
    return next(e for e in events if e.type == "sources").data


def documents_cited(events) -> set[int]:
    return {c["document_id"] for c in sources_of(events)["citations"]}


async def test_a_named_document_is_searched_first_and_the_answer_says_so(guides, staff_user):
    bare = await collect(user=staff_user, question=BARE)
    assert guides["handbook"].pk in documents_cited(bare)  # the wording prefers the handbook
    assert sources_of(bare)["searched_document"] is None

    message_id = uuid.uuid4()
    named = await collect(user=staff_user, question=NAMED, message_id=message_id)

    assert documents_cited(named) == {guides["contractors"].pk}
    contractors = guides["contractors"]
    assert sources_of(named)["searched_document"] == {
        "id": contractors.pk,
        "title": "Contractor guide",
    }
    answer = await Message.objects.aget(reply_to_id=message_id)
    assert (answer.searched_document_id, answer.searched_document_title) == (
        contractors.pk,
        "Contractor guide",
    )


async def test_a_named_document_without_the_answer_falls_back_to_everything(guides, staff_user):
    events = await collect(user=staff_user, question=LEAVE_IN_CONTRACTORS)

    assert event_types(events)[-1] == "answer_end"
    assert documents_cited(events) == {guides["handbook"].pk}
    assert sources_of(events)["searched_document"] is None
    answer = await Message.objects.aget(role=Message.Role.ASSISTANT)
    assert answer.searched_document_id is None and answer.searched_document_title == ""


LEAVE_IN_CONTRACTORS = (
    "In the contractor guide, how many days of paid annual leave do full-time employees receive?"
)


@pytest.mark.parametrize(("margin", "document"), [(0.0, "handbook"), (1.0, "contractors")])
async def test_the_named_document_answers_only_within_the_margin(
    guides, staff_user, monkeypatch, margin, document
):
    # The contractor guide's passages pass the evidence check on their own, far below the
    # handbook's: the margin decides.
    monkeypatch.setattr("chat.answering.search.NAMED_MARGIN", margin)

    events = await collect(user=staff_user, question=LEAVE_IN_CONTRACTORS)

    assert documents_cited(events) == {guides[document].pk}
    searched = sources_of(events)["searched_document"]
    assert (searched or {}).get("id") == (guides[document].pk if margin else None)


async def test_the_refusal_stays_when_no_document_holds_the_answer(guides, staff_user):
    events = await collect(
        user=staff_user, question="In the contractor guide, what is the office dress code?"
    )

    assert event_types(events) == ["refusal"]
    assert events[0].data["message"] == NO_EVIDENCE_MESSAGE


async def test_naming_a_document_the_asker_may_not_read_changes_nothing(db):
    people = await sync_to_async(readers_create)(with_outsiders=False)
    hr_only = await sync_to_async(collection_create)(name="HR only", groups=[people["hr"]])
    await sync_to_async(document_create)(title="Staff handbook", texts=HANDBOOK_TEXTS)
    await sync_to_async(document_create)(
        title="Contractor guide", texts=CONTRACTOR_TEXTS, collection=hr_only
    )
    staff = people["staff"]
    assert (await sync_to_async(reader_for)(staff)).is_superuser is False

    bare = await collect(user=staff, question=BARE)
    named = await collect(user=staff, question=NAMED)

    assert event_types(named) == event_types(bare)
    assert documents_cited(named) == documents_cited(bare)
    assert sources_of(named)["searched_document"] is None
    text = "".join(e.data.get("text", "") for e in named if e.type == "answer_delta")
    assert "contractor" not in text.lower()


async def test_a_document_filter_without_the_named_document_wins(guides, staff_user):
    events = await collect(
        user=staff_user,
        question=NAMED,
        options=AnswerOptions(document_ids=[guides["handbook"].pk]),
    )

    assert documents_cited(events) == {guides["handbook"].pk}
    assert sources_of(events)["searched_document"] is None


def test_history_and_replay_show_the_searched_document(guides, staff_user):
    client = Client()
    client.force_login(staff_user)
    conversation_id, message_id = uuid.uuid4(), uuid.uuid4()
    async_to_sync(collect)(
        user=staff_user, question=NAMED, message_id=message_id, conversation_id=conversation_id
    )

    replayed = async_to_sync(collect)(
        user=staff_user, question=NAMED, message_id=message_id, conversation_id=conversation_id
    )
    assert sources_of(replayed)["searched_document"]["title"] == "Contractor guide"
    messages = client.get(f"/api/conversations/{conversation_id}/messages").json()["messages"]
    answer = next(m for m in messages if m["role"] == "assistant")
    assert answer["searched_document"] == {
        "id": guides["contractors"].pk,
        "title": "Contractor guide",
    }
    assert next(m for m in messages if m["role"] == "user")["searched_document"] is None
    page = client.get(f"/c/{conversation_id}/").content.decode()
    assert "Searched in: Contractor guide" in page


def test_the_searched_document_title_is_escaped_on_the_page(staff_user):
    document_create(title="Contractor <b>guide</b>", texts=CONTRACTOR_TEXTS)
    client = Client()
    client.force_login(staff_user)
    conversation_id = uuid.uuid4()
    events = async_to_sync(collect)(
        user=staff_user, question=NAMED, conversation_id=conversation_id
    )
    assert sources_of(events)["searched_document"]["title"] == "Contractor <b>guide</b>"

    page = client.get(f"/c/{conversation_id}/").content.decode()
    assert "Searched in: Contractor &lt;b&gt;guide&lt;/b&gt;" in page
    assert "<b>guide</b>" not in page


async def test_the_websocket_shows_the_searched_document(guides, staff_user):
    communicator = await socket_for(staff_user, uuid.uuid4())
    await communicator.send_to(text_data=send_payload(NAMED))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()

    sources = [f for f in fragments if "data-searched-document" in f]
    assert sources and "Searched in: Contractor guide" in sources[0]
