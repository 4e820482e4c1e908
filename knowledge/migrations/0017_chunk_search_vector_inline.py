"""A chunk's `search_vector` is kept in its row (storage MAIN), not moved out of line into the
TOAST table, and the rows whose vector is out of line now are written again so that it comes
back in (docs/decisions/0172-the-search-vector-in-its-row.md)."""

from django.db import migrations


def _search_vectors_brought_in(apps, schema_editor) -> None:
    """Write again each chunk whose `search_vector` is stored out of line, so the database
    computes it anew and stores it under MAIN. PostgreSQL 17 and later say which values are out
    of line (`pg_column_toast_chunk_id`); before it, the rows long enough to have been moved
    (their text and vector over the 2 kB a row may take in line) are written again."""
    connection = schema_editor.connection
    if connection.pg_version >= 170000:
        moved = "pg_column_toast_chunk_id(search_vector) IS NOT NULL"
    else:
        moved = "pg_column_size(text) + pg_column_size(search_vector) > 1800"
    with connection.cursor() as cursor:
        # SET text = text: the generated column is computed again, from the same text.
        cursor.execute(f"UPDATE knowledge_chunk SET text = text WHERE {moved}")


_COLUMN = "ALTER TABLE knowledge_chunk ALTER COLUMN search_vector"


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0016_chunk_document_newest"),
    ]

    operations = [
        migrations.RunSQL(
            f"{_COLUMN} SET STORAGE MAIN", reverse_sql=f"{_COLUMN} SET STORAGE EXTENDED"
        ),
        migrations.RunPython(_search_vectors_brought_in, migrations.RunPython.noop),
    ]
