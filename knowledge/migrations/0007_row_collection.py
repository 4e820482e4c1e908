"""Each chunk and embedding row carries its document's collection (and each embedding its
chunk's document), kept equal to them by the database
(docs/decisions/0077-the-collection-on-every-searched-row.md).

Adds `collection` to `Chunk` and `Embedding` and `document` to `Embedding`, fills them, makes
them NOT NULL and indexes them; then three triggers keep them in step whatever writes the rows
(the ORM, COPY, raw SQL):

- a chunk inserted, or its document or collection changed, takes its document's collection;
- an embedding inserted, or its chunk, document or collection changed, takes its chunk's
  document and collection;
- a document whose collection changes passes the new one to its chunks and their embeddings,
  in the same statement (so a move is seen by the next search, and never half-done).
"""

import django.db.models.deletion
from django.db import migrations, models

TRIGGERS = """
CREATE FUNCTION knowledge_chunk_collection_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT collection_id INTO NEW.collection_id
    FROM knowledge_document WHERE id = NEW.document_id;
    RETURN NEW;
END $$;
CREATE TRIGGER knowledge_chunk_collection
    BEFORE INSERT OR UPDATE OF document_id, collection_id ON knowledge_chunk
    FOR EACH ROW EXECUTE FUNCTION knowledge_chunk_collection_set();

CREATE FUNCTION knowledge_embedding_collection_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT collection_id, document_id INTO NEW.collection_id, NEW.document_id
    FROM knowledge_chunk WHERE id = NEW.chunk_id;
    RETURN NEW;
END $$;
CREATE TRIGGER knowledge_embedding_collection
    BEFORE INSERT OR UPDATE OF chunk_id, collection_id, document_id ON knowledge_embedding
    FOR EACH ROW EXECUTE FUNCTION knowledge_embedding_collection_set();

CREATE FUNCTION knowledge_document_collection_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE knowledge_chunk SET collection_id = NEW.collection_id WHERE document_id = NEW.id;
    UPDATE knowledge_embedding SET collection_id = NEW.collection_id WHERE document_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER knowledge_document_collection_moved
    AFTER UPDATE OF collection_id ON knowledge_document
    FOR EACH ROW WHEN (OLD.collection_id IS DISTINCT FROM NEW.collection_id)
    EXECUTE FUNCTION knowledge_document_collection_moved();
"""

TRIGGERS_DROP = """
DROP TRIGGER knowledge_document_collection_moved ON knowledge_document;
DROP FUNCTION knowledge_document_collection_moved();
DROP TRIGGER knowledge_embedding_collection ON knowledge_embedding;
DROP FUNCTION knowledge_embedding_collection_set();
DROP TRIGGER knowledge_chunk_collection ON knowledge_chunk;
DROP FUNCTION knowledge_chunk_collection_set();
"""

FILL = """
UPDATE knowledge_chunk AS c SET collection_id = d.collection_id
FROM knowledge_document AS d WHERE d.id = c.document_id;
UPDATE knowledge_embedding AS e SET collection_id = c.collection_id, document_id = c.document_id
FROM knowledge_chunk AS c WHERE c.id = e.chunk_id;
"""


def _row_collection(*, null: bool) -> models.ForeignKey:
    return models.ForeignKey(
        editable=False,
        null=null,
        on_delete=django.db.models.deletion.PROTECT,
        related_name="+",
        to="knowledge.collection",
        help_text="Its document's collection, kept equal to it by the database.",
    )


def _row_document(*, null: bool) -> models.ForeignKey:
    return models.ForeignKey(
        editable=False,
        null=null,
        on_delete=django.db.models.deletion.CASCADE,
        related_name="+",
        to="knowledge.document",
        help_text="Its chunk's document, kept equal to it by the database.",
    )


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0006_collection")]

    operations = [
        migrations.AddField(
            model_name="chunk", name="collection", field=_row_collection(null=True)
        ),
        migrations.AddField(
            model_name="embedding", name="collection", field=_row_collection(null=True)
        ),
        migrations.AddField(
            model_name="embedding", name="document", field=_row_document(null=True)
        ),
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
        migrations.AlterField(
            model_name="chunk", name="collection", field=_row_collection(null=False)
        ),
        migrations.AlterField(
            model_name="embedding", name="collection", field=_row_collection(null=False)
        ),
        migrations.AlterField(
            model_name="embedding", name="document", field=_row_document(null=False)
        ),
        migrations.RunSQL(TRIGGERS, TRIGGERS_DROP),
    ]
