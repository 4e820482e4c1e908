"""Integers a client sends (docs/decisions/0103-client-integers.md): one parser,
`pages.client_input.client_int`, so that a Unicode digit ("²", "١") or an enormous number is a
clear refusal on every surface, never a 500 or a dropped socket."""

from __future__ import annotations

import json
import uuid

import pytest
from django.test import Client

from chat.models import Feedback, Message
from pages.client_input import BIGINT_MAX, client_int
from tests.support.clients import fragments_until_idle, send_payload, socket_for
from tests.support.knowledge_base import LEAVE_TEXTS, document_create

LEAVE_QUESTION = "How many days of paid annual leave do full-time employees receive?"


@pytest.mark.parametrize(
    ("value", "expected"), [("7", 7), (" 12\n", 12), ("-3", -3), (5, 5), ("0019", 19)]
)
def test_plain_integers_are_read(value, expected):
    assert client_int(value) == expected


@pytest.mark.parametrize(
    "value",
    ["²", "١٢", "1²", "", " ", "1.0", "1e3", "+1", "0x10", "1_000", "9" * 20, True, 1.0, None, [1]],
)
def test_anything_else_is_a_value_error(value):
    with pytest.raises(ValueError):
        client_int(value)


def test_bounds_are_checked():
    assert client_int("20", minimum=1, maximum=20) == 20
    with pytest.raises(ValueError, match="from 1 to 20"):
        client_int("21", minimum=1, maximum=20)
    with pytest.raises(ValueError):
        client_int(str(BIGINT_MAX + 1))


@pytest.fixture
def leave_kb(db):
    return document_create(title="Staff handbook", texts=LEAVE_TEXTS)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("top_k", ["²", "١", "9" * 40])
async def test_a_unicode_digit_top_k_on_the_socket_is_a_clear_refusal(staff_user, leave_kb, top_k):
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION, top_k=top_k))
    fragments = await fragments_until_idle(communicator, timeout=15)
    # The socket stays open: the next question is answered.
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION, top_k="3"))
    answered = await fragments_until_idle(communicator, timeout=60)
    await communicator.disconnect()
    assert "top_k must be" in "".join(fragments)
    assert "25 days" in "".join(answered)
    assert await Message.objects.filter(conversation_id=conversation_id).acount() == 2


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("document_ids", [["²"], ["1.5"], [True], [str(10**30)]])
async def test_a_malformed_document_filter_on_the_socket_is_refused(
    staff_user, leave_kb, document_ids
):
    communicator = await socket_for(staff_user, uuid.uuid4())
    payload = json.loads(send_payload(LEAVE_QUESTION))
    await communicator.send_to(text_data=json.dumps({**payload, "document_ids": document_ids}))
    fragments = await fragments_until_idle(communicator, timeout=15)
    await communicator.disconnect()
    assert "document filter is malformed" in "".join(fragments)


@pytest.mark.django_db
@pytest.mark.parametrize("rating", ["²", "١", "9" * 5000])
def test_a_unicode_digit_rating_is_a_400(staff_user, rating):
    from chat.models import Conversation

    conversation = Conversation.objects.create(owner=staff_user, title="Leave")
    question = Message.objects.create(conversation=conversation, role="user", content="Leave?")
    answer = Message.objects.create(
        conversation=conversation, role="assistant", content="25 days.", reply_to=question
    )
    client = Client()
    client.force_login(staff_user)
    response = client.post(f"/messages/{answer.pk}/feedback/", {"rating": rating})
    assert response.status_code == 400
    assert not Feedback.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("top_k", ["²", "١", "9" * 40])
def test_api_integers_with_unicode_digits_are_a_422(staff_user, leave_kb, top_k):
    client = Client()
    client.force_login(staff_user)
    response = client.get("/api/search", {"q": "annual leave", "top_k": top_k})
    assert response.status_code == 422, response.content
    assert "top_k" in response.json()["error"]["details"]


@pytest.mark.django_db
@pytest.mark.parametrize("file_id", ["²", "١", "9" * 40, "0"])
def test_a_personal_file_id_that_is_no_whole_number_is_not_found(staff_user, file_id):
    client = Client()
    client.force_login(staff_user)
    for method in (client.get, client.delete):
        response = method(f"/api/files/{file_id}")
        assert response.status_code == 404, response.content
        assert response.json()["error"]["code"] == "not-found"
