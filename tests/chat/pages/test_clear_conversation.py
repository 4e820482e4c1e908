"""Clearing a conversation (`chat.services.conversation_clear`, `POST /c/<id>/clear/`): the
owner deletes its messages and keeps the conversation; nobody else may; not while an answer is
being written."""

from __future__ import annotations

import pytest
from django.test import Client

from chat.models import Citation, Conversation, Feedback, Message
from tests.support.conversations import exchange_create

pytestmark = pytest.mark.django_db


def _shared_conversation(owner) -> Conversation:
    conversation = Conversation.objects.create(owner=owner, title="Leave questions")
    exchange_create(conversation, question="How much leave?", answer="25 days.")
    exchange_create(conversation, question="And carry-over?", answer="Five days.")
    return conversation


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_owner_clears_the_messages_and_keeps_the_conversation(staff_user):
    conversation = _shared_conversation(staff_user)
    answer = conversation.messages.filter(role=Message.Role.ASSISTANT).first()
    Feedback.objects.create(user=staff_user, message=answer, rating=Feedback.Rating.UP)
    before = conversation.updated_at

    response = _client(staff_user).post(f"/c/{conversation.pk}/clear/")
    assert response.status_code == 302 and response["Location"] == f"/c/{conversation.pk}/"
    assert not Message.objects.filter(conversation=conversation).exists()
    assert not Feedback.objects.filter(message__conversation=conversation).exists()
    kept = Conversation.objects.get(pk=conversation.pk)
    assert (kept.title, kept.is_private, kept.owner_id) == ("Leave questions", False, staff_user.pk)
    assert kept.updated_at > before

    page = _client(staff_user).get(f"/c/{conversation.pk}/").content.decode()
    assert "How much leave?" not in page and 'data-role="user"' not in page


def test_an_htmx_clear_is_told_where_to_go(staff_user):
    conversation = _shared_conversation(staff_user)
    response = _client(staff_user).post(f"/c/{conversation.pk}/clear/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/c/{conversation.pk}/"
    assert not conversation.messages.exists()


def test_a_reader_of_a_shared_conversation_may_not_clear_it(staff_user, other_staff_user):
    conversation = _shared_conversation(staff_user)
    client = _client(other_staff_user)
    page = client.get(f"/c/{conversation.pk}/").content.decode()
    assert "Clear conversation" not in page  # the action is the owner's only
    response = client.post(f"/c/{conversation.pk}/clear/")
    assert response.status_code == 403
    assert conversation.messages.count() == 4


def test_a_private_conversation_of_someone_else_is_not_found(staff_user, other_staff_user):
    conversation = _shared_conversation(staff_user)
    Conversation.objects.filter(pk=conversation.pk).update(is_private=True)
    response = _client(other_staff_user).post(f"/c/{conversation.pk}/clear/")
    assert response.status_code == 404
    assert conversation.messages.count() == 4


def test_not_while_an_answer_is_being_written_and_only_by_post(staff_user):
    conversation = _shared_conversation(staff_user)
    question = Message.objects.create(conversation=conversation, role="user", content="More?")
    Message.objects.create(
        conversation=conversation,
        role="assistant",
        reply_to=question,
        status=Message.Status.STREAMING,
    )
    client = _client(staff_user)
    response = client.post(f"/c/{conversation.pk}/clear/")
    assert response.status_code == 409
    assert "stop it first" in response.content.decode()
    assert conversation.messages.count() == 6
    assert client.get(f"/c/{conversation.pk}/clear/").status_code == 405


def test_clearing_deletes_the_citations_with_the_answers(staff_user, policies_kb):
    conversation = Conversation.objects.create(owner=staff_user, title="Cited")
    exchange_create(
        conversation,
        question="How much leave?",
        answer="25 days [1].",
        cited=list(policies_kb["handbook"].chunks.all()[:1]),
    )
    assert Citation.objects.filter(message__conversation=conversation).count() == 1
    _client(staff_user).post(f"/c/{conversation.pk}/clear/")
    assert not Citation.objects.filter(message__conversation=conversation).exists()
    assert policies_kb["handbook"].chunks.exists()  # the documents are untouched
