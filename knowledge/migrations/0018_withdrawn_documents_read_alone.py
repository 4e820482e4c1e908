"""The documents a search tests its rows against are read alone: the partial index
`document_withdrawn` holds the disabled and not ready ones only, and `document_expiry` gives
the expired ones by their expiry, never the documents expiring later
(docs/decisions/0176-withdrawn-documents-read-alone.md)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0017_chunk_search_vector_inline"),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="document",
            name="document_withdrawn",
        ),
        migrations.AddIndex(
            model_name="document",
            index=models.Index(
                condition=models.Q(
                    ("enabled", False), ~models.Q(("status", "ready")), _connector="OR"
                ),
                fields=["id"],
                name="document_withdrawn",
            ),
        ),
        migrations.AddIndex(
            model_name="document",
            index=models.Index(
                condition=models.Q(("expires_at__isnull", False)),
                fields=["expires_at"],
                include=("id",),
                name="document_expiry",
            ),
        ),
    ]
