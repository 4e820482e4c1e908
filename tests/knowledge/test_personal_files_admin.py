"""A personal file is not managed in the documents' admin, not even by its owner: a document
manager cannot move their own personal file into a collection, nor clear or change its
expiry, nor disable it; it is not listed there (the superusers' read-only page lists it)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from knowledge.collections import collection_default, documents_move
from knowledge.models import Document, collection_personal_id
from tests.support.personal import personal_file_create

pytestmark = pytest.mark.django_db

DOCUMENTS_URL = reverse("admin:knowledge_document_changelist")


@pytest.fixture
def manager(django_user_model):
    """Staff who manage documents (every document permission)."""
    user = django_user_model.objects.create_user(username="manager", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="knowledge", codename__endswith="_document"
        )
    )
    return user


@pytest.fixture
def own_file(manager):
    return personal_file_create(manager, title="My salary slip", texts=["Net pay 3,912 euros."])


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_a_manager_cannot_move_their_personal_file_into_a_collection(manager, own_file):
    client = logged_in(manager)
    general = collection_default()
    client.post(
        DOCUMENTS_URL,
        {
            "action": "move_to_collection",
            "_selected_action": [own_file.pk],
            "apply": "Move",
            "collection": general.pk,
        },
        follow=True,
    )
    own_file.refresh_from_db()
    assert own_file.collection_id == collection_personal_id()
    # Nor does the service move one, whoever calls it.
    assert documents_move(ids=[own_file.pk], collection=general) == 0
    own_file.refresh_from_db()
    assert own_file.collection_id == collection_personal_id()


def test_a_manager_cannot_clear_their_personal_files_expiry_or_open_its_page(manager, own_file):
    client = logged_in(manager)
    change = reverse("admin:knowledge_document_change", args=[own_file.pk])
    expires = own_file.expires_at
    assert client.get(change).status_code in (302, 404)  # "does not exist" → the list
    client.post(
        change,
        {"title": "My salary slip", "collection": collection_default().pk, "enabled": "on"},
    )
    own_file.refresh_from_db()
    assert own_file.expires_at == expires
    assert own_file.collection_id == collection_personal_id()


def test_a_manager_cannot_disable_their_personal_file_nor_see_it_listed(manager, own_file):
    client = logged_in(manager)
    assert "My salary slip" not in client.get(DOCUMENTS_URL).content.decode()
    client.post(
        DOCUMENTS_URL,
        {"action": "disable_documents", "_selected_action": [own_file.pk]},
        follow=True,
    )
    assert Document.objects.get(pk=own_file.pk).enabled
