"""Collections in the admin: create and edit them and their readers, see their documents, move
documents between them (a bulk action with an intermediate page), choose one on upload; and
the admin as no way around a collection's readers or the admin permissions."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from knowledge.collections import collection_create, collection_default
from knowledge.models import Collection, Document
from tests.support.knowledge_base import basis, document_create

pytestmark = pytest.mark.django_db

DOCUMENTS_URL = reverse("admin:knowledge_document_changelist")
ADD_DOCUMENT_URL = reverse("admin:knowledge_document_add")
CHUNKS_URL = reverse("admin:knowledge_chunk_changelist")
COLLECTIONS_URL = reverse("admin:knowledge_collection_changelist")
ADD_COLLECTION_URL = reverse("admin:knowledge_collection_add")
PAY_BANDS = "Grade 7 analysts are paid on the Quillfeather band."


@pytest.fixture(autouse=True)
def media_root(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


@pytest.fixture
def hr_group():
    return Group.objects.create(name="HR")


@pytest.fixture
def hr(hr_group):
    return collection_create(name="HR only", groups=[hr_group])


@pytest.fixture
def handbook():
    return document_create(title="Handbook", texts=["Annual leave is 25 days."], vectors=[basis(0)])


@pytest.fixture
def pay_bands(hr):
    document = document_create(title="Pay bands", texts=[PAY_BANDS], vectors=[basis(1)])
    document.collection = hr
    document.save()
    return document


@pytest.fixture
def manager(django_user_model):
    """Staff who manage documents (every document permission) but read no restricted
    collection, and may not touch collections."""
    user = django_user_model.objects.create_user(username="manager", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="knowledge", codename__endswith="_document"
        )
    )
    return user


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def move(client, documents, collection=None):
    data = {"action": "move_to_collection", "_selected_action": [d.pk for d in documents]}
    if collection is not None:
        data |= {"apply": "Move", "collection": collection.pk}
    return client.post(DOCUMENTS_URL, data, follow=True)


# --- Collections ---------------------------------------------------------------------------------
def test_an_admin_creates_a_restricted_collection_with_its_readers(
    admin_client, hr_group, django_user_model
):
    alice = django_user_model.objects.create_user(username="alice", is_staff=True)

    response = admin_client.post(
        ADD_COLLECTION_URL,
        {
            "name": "Board papers",
            "description": "Minutes",
            "reader_groups": [hr_group.pk],
            "reader_users": [alice.pk],
        },
    )

    assert response.status_code == 302
    collection = Collection.objects.get(name="Board papers")
    assert not collection.all_staff
    assert list(collection.reader_groups.all()) == [hr_group]
    assert list(collection.reader_users.all()) == [alice]
    listing = admin_client.get(COLLECTIONS_URL).content.decode()
    assert "Board papers" in listing and "group HR, user alice" in listing


def test_the_collection_list_and_page_show_readers_and_link_to_the_documents(
    admin_client, hr, pay_bands, handbook
):
    listing = admin_client.get(COLLECTIONS_URL).content.decode()
    page = admin_client.get(reverse("admin:knowledge_collection_change", args=[hr.pk]))

    assert "All staff" in listing and "group HR" in listing
    link = f"{DOCUMENTS_URL}?collection__id__exact={hr.pk}"
    assert link.replace("&", "&amp;") in listing or link in listing
    assert "1 document(s): open the list" in page.content.decode()
    filtered = admin_client.get(link).content.decode()
    assert "Pay bands" in filtered and "Handbook" not in filtered


def test_an_admin_edits_the_readers_of_a_collection(admin_client, hr, django_user_model):
    bob = django_user_model.objects.create_user(username="bob", is_staff=True)

    admin_client.post(
        reverse("admin:knowledge_collection_change", args=[hr.pk]),
        {"name": "HR only", "description": "", "all_staff": "", "reader_users": [bob.pk]},
    )

    hr.refresh_from_db()
    assert list(hr.reader_groups.all()) == [] and list(hr.reader_users.all()) == [bob]


def test_the_default_collection_cannot_be_deleted(admin_client, handbook):
    general = collection_default()

    response = admin_client.post(
        reverse("admin:knowledge_collection_delete", args=[general.pk]), {"post": "yes"}
    )

    assert response.status_code == 403
    assert Collection.objects.filter(pk=general.pk).exists()


def test_a_collection_holding_documents_cannot_be_deleted(admin_client, hr, pay_bands):
    response = admin_client.post(
        reverse("admin:knowledge_collection_delete", args=[hr.pk]), {"post": "yes"}
    )

    assert "Pay bands" in response.content.decode()  # named as what protects it
    assert Collection.objects.filter(pk=hr.pk).exists()
    assert Document.objects.filter(pk=pay_bands.pk, collection=hr).exists()


def test_staff_without_the_collection_permissions_cannot_open_or_change_collections(manager, hr):
    client = logged_in(manager)

    assert client.get(COLLECTIONS_URL).status_code == 403
    assert client.post(ADD_COLLECTION_URL, {"name": "Mine"}).status_code == 403
    change = reverse("admin:knowledge_collection_change", args=[hr.pk])
    assert client.post(change, {"name": "HR only", "all_staff": "on"}).status_code == 403
    hr.refresh_from_db()
    assert not hr.all_staff and not Collection.objects.filter(name="Mine").exists()


# --- Documents -----------------------------------------------------------------------------------
def test_the_document_list_shows_and_filters_by_collection(admin_client, handbook, pay_bands, hr):
    listing = admin_client.get(DOCUMENTS_URL).content.decode()
    filtered = admin_client.get(DOCUMENTS_URL, {"collection__id__exact": hr.pk}).content.decode()

    assert "HR only" in listing and "General" in listing
    assert "Pay bands" in filtered and "Handbook" not in filtered


def test_moving_documents_shows_an_intermediate_page_then_moves_them(admin_client, handbook, hr):
    page = move(admin_client, [handbook])

    content = page.content.decode()
    assert "Move documents to a collection" in content and "Handbook" in content
    assert "(now in General)" in content
    handbook.refresh_from_db()
    assert handbook.collection == collection_default()  # nothing moved yet

    done = move(admin_client, [handbook], hr)

    assert "1 document(s) moved to “HR only”." in done.content.decode()
    handbook.refresh_from_db()
    assert handbook.collection == hr


def test_staff_who_may_only_view_documents_cannot_move_them(django_user_model, handbook, hr):
    viewer = django_user_model.objects.create_user(username="viewer", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_document"))
    viewer.groups.add(Group.objects.get(name="HR"))

    response = move(logged_in(viewer), [handbook], hr)

    assert "moved" not in response.content.decode()
    handbook.refresh_from_db()
    assert handbook.collection == collection_default()


def test_upload_puts_the_document_in_the_chosen_collection(admin_client, hr):
    form = admin_client.get(ADD_DOCUMENT_URL).content.decode()
    assert 'name="collection"' in form and "HR only" in form

    admin_client.post(
        ADD_DOCUMENT_URL,
        {"file": SimpleUploadedFile("pay.md", b"# Pay\n\nBands."), "collection": hr.pk},
    )

    assert Document.objects.get().collection == hr


def test_upload_without_a_collection_goes_to_the_default_one(admin_client):
    admin_client.post(ADD_DOCUMENT_URL, {"file": SimpleUploadedFile("a.md", b"# A\n\nText.")})

    assert Document.objects.get().collection == collection_default()


# --- A manager who may not read a collection ------------------------------------------------------
def test_a_manager_sees_no_document_or_chunk_of_a_collection_they_may_not_read(
    manager, handbook, pay_bands
):
    client = logged_in(manager)

    listing = client.get(DOCUMENTS_URL).content.decode()
    chunks = client.get(CHUNKS_URL).content.decode()
    page = client.get(reverse("admin:knowledge_document_change", args=[pay_bands.pk]))

    assert "Handbook" in listing and "Pay bands" not in listing
    assert "Annual leave" in chunks and "Quillfeather" not in chunks
    assert page.status_code == 302  # the admin's "does not exist" redirect
    assert "Quillfeather" not in client.get(page.url).content.decode()


def test_a_manager_can_neither_upload_nor_move_into_a_collection_they_may_not_read(
    manager, handbook, hr
):
    client = logged_in(manager)

    form = client.get(ADD_DOCUMENT_URL).content.decode()
    upload = client.post(
        ADD_DOCUMENT_URL, {"file": SimpleUploadedFile("x.md", b"# X\n\nText."), "collection": hr.pk}
    )
    moved = move(client, [handbook], hr)

    assert "HR only" not in form
    assert upload.status_code == 200 and list(Document.objects.all()) == [handbook]
    assert "moved" not in moved.content.decode()
    handbook.refresh_from_db()
    assert handbook.collection == collection_default()


def test_a_manager_cannot_act_on_a_document_they_may_not_read(manager, pay_bands):
    client = logged_in(manager)

    client.post(
        DOCUMENTS_URL,
        {"action": "disable_documents", "_selected_action": [pay_bands.pk]},
        follow=True,
    )

    pay_bands.refresh_from_db()
    assert pay_bands.enabled


def test_a_manager_cannot_move_a_document_into_a_restricted_collection_on_its_page(
    manager, handbook, hr
):
    client = logged_in(manager)
    change = reverse("admin:knowledge_document_change", args=[handbook.pk])

    form = client.get(change).content.decode()
    response = client.post(change, {"title": "Handbook", "collection": hr.pk, "enabled": "on"})

    assert "HR only" not in form
    assert response.status_code == 200  # the form again, with the error
    handbook.refresh_from_db()
    assert handbook.collection == collection_default()


def test_the_in_progress_note_counts_only_documents_the_user_may_read(manager, hr, admin_client):
    pending = Document.objects.create(title="Queued pay review", source="pay.md")
    pending.collection = hr
    pending.save()

    assert "1 document waiting" in admin_client.get(DOCUMENTS_URL).content.decode()
    assert "waiting for or in" not in logged_in(manager).get(DOCUMENTS_URL).content.decode()
