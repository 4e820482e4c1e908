"""Collections: who may read which document (docs/decisions/0070-the-one-read-rule.md,
docs/decisions/0071-general-the-default-collection.md).

Creates the collection table and "General" (readable by all staff, the default), then gives
every document a collection: added nullable, every existing document moved to General, then
made NOT NULL. The field's default (`collection_default_id`, a callable that reads today's
model) is only declared in the migration state, never called here: the database steps run
SQL and the historical models alone.
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

import knowledge.models


def general_create_and_fill(apps, schema_editor):
    Collection = apps.get_model("knowledge", "Collection")
    Document = apps.get_model("knowledge", "Document")
    general, _ = Collection.objects.using(schema_editor.connection.alias).get_or_create(
        is_default=True, defaults={"name": "General", "all_staff": True}
    )
    Document.objects.using(schema_editor.connection.alias).filter(
        collection__isnull=True
    ).update(collection=general)


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("knowledge", "0005_document_chunker_version"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="Collection",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=200, unique=True)),
                ("description", models.TextField(blank=True)),
                (
                    "all_staff",
                    models.BooleanField(
                        default=False,
                        help_text="Every staff member may read its documents. Untick it to "
                        "restrict them to the reader groups and users below (kept, but without "
                        "effect, while it is ticked).",
                        verbose_name="readable by all staff",
                    ),
                ),
                (
                    "is_default",
                    models.BooleanField(
                        default=False,
                        editable=False,
                        help_text='The collection new documents go to when none is named ("General").',
                    ),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                (
                    "reader_groups",
                    models.ManyToManyField(
                        blank=True,
                        help_text="Members of these groups may read the collection's documents.",
                        related_name="readable_collections",
                        to="auth.group",
                    ),
                ),
                (
                    "reader_users",
                    models.ManyToManyField(
                        blank=True,
                        help_text="These users may read the collection's documents.",
                        related_name="readable_collections",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={"ordering": ["name", "id"]},
        ),
        migrations.AddConstraint(
            model_name="collection",
            constraint=models.UniqueConstraint(
                condition=models.Q(("is_default", True)),
                fields=("is_default",),
                name="collection_one_default",
            ),
        ),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AddField(
                    model_name="document",
                    name="collection",
                    field=models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="documents",
                        to="knowledge.collection",
                    ),
                ),
                migrations.RunPython(general_create_and_fill, migrations.RunPython.noop),
                migrations.RunSQL(
                    "ALTER TABLE knowledge_document ALTER COLUMN collection_id SET NOT NULL",
                    "ALTER TABLE knowledge_document ALTER COLUMN collection_id DROP NOT NULL",
                ),
            ],
            state_operations=[
                migrations.AddField(
                    model_name="document",
                    name="collection",
                    field=models.ForeignKey(
                        default=knowledge.models.collection_default_id,
                        help_text="Who may read the document is decided by its collection's "
                        "readers.",
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="documents",
                        to="knowledge.collection",
                    ),
                ),
            ],
        ),
    ]
