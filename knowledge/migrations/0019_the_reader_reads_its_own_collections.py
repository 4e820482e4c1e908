"""The all-staff collections in a partial index of their own: the Reader's statement reads
them, and the collections the user is granted, without reading every collection
(docs/decisions/0178-the-reader-reads-its-own-collections.md)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0018_withdrawn_documents_read_alone"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="collection",
            index=models.Index(
                condition=models.Q(("all_staff", True), ("is_personal", False)),
                fields=["id"],
                name="collection_all_staff",
            ),
        ),
    ]
