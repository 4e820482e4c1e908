"""The migration that brings collections: existing documents land in "General", readable by all
staff, and documents created afterwards without a collection go there too."""

from __future__ import annotations

import pytest
from django.db import connection

from knowledge.collections import collection_default
from knowledge.models import Document
from tests.support.migrations import migrate

BEFORE = [("knowledge", "0005_document_chunker_version")]
AFTER = [("knowledge", "0006_collection")]


@pytest.mark.django_db(transaction=True)
def test_existing_documents_move_to_general_readable_by_all_staff(latest_schema_after):
    old_apps = migrate(BEFORE)
    try:
        OldDocument = old_apps.get_model("knowledge", "Document")
        for name in ("handbook", "policy"):
            OldDocument.objects.create(title=name, source=f"{name}.md", media_type="text/markdown")
    finally:
        new_apps = migrate(AFTER)

    Collection = new_apps.get_model("knowledge", "Collection")
    MigratedDocument = new_apps.get_model("knowledge", "Document")
    general = Collection.objects.get()
    assert (general.name, general.all_staff, general.is_default) == ("General", True, True)
    assert sorted(MigratedDocument.objects.values_list("title", "collection_id")) == [
        ("handbook", general.pk),
        ("policy", general.pk),
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT is_nullable FROM information_schema.columns "
            "WHERE table_name = 'knowledge_document' AND column_name = 'collection_id'"
        )
        assert cursor.fetchone() == ("NO",)


@pytest.mark.django_db
def test_a_document_created_without_a_collection_goes_to_the_default_one():
    document = Document.objects.create(title="Handbook", source="handbook.md")

    assert document.collection == collection_default()
    assert document.collection.all_staff
