"""Each chunk and embedding row carries when its document is withdrawn from searches, kept equal
to the document's state by the database, so a search tests availability on the row instead of
reading every withdrawn document (docs/decisions/0179-the-row-knows-when-it-is-withdrawn.md).

`withdrawn_at` is `knowledge_withdrawn_at(enabled, status, expires_at)`: NULL for an enabled,
ready document without an expiry date, its expiry date, or 1970-01-01 while it is disabled or
not ready. A row is searched while it is NULL or later than the moment of the search. The
triggers of migration 0007, which copy the collection, copy it too:

- a chunk inserted, or its document, collection or copy changed, takes its document's;
- an embedding inserted, or its chunk, document, collection or copy changed, takes its chunk's;
- a document whose state changes it passes the new value to its chunks and their embeddings
  in the same statement, so disabling a document is seen by the next search.

The `embedding_collection_bits` index includes the copy, so the row-by-row k-NN still reads
the reader's rows from that index alone.
"""

from django.db import migrations, models

FUNCTIONS = """
CREATE FUNCTION knowledge_withdrawn_at(enabled boolean, status varchar, expires_at timestamptz)
RETURNS timestamptz LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN NOT enabled OR status <> 'ready' THEN 'epoch'::timestamptz
                ELSE expires_at END
$$;

CREATE OR REPLACE FUNCTION knowledge_chunk_collection_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT collection_id, knowledge_withdrawn_at(enabled, status, expires_at)
    INTO NEW.collection_id, NEW.withdrawn_at
    FROM knowledge_document WHERE id = NEW.document_id;
    RETURN NEW;
END $$;
DROP TRIGGER knowledge_chunk_collection ON knowledge_chunk;
CREATE TRIGGER knowledge_chunk_collection
    BEFORE INSERT OR UPDATE OF document_id, collection_id, withdrawn_at ON knowledge_chunk
    FOR EACH ROW EXECUTE FUNCTION knowledge_chunk_collection_set();

CREATE OR REPLACE FUNCTION knowledge_embedding_collection_set() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT collection_id, document_id, withdrawn_at
    INTO NEW.collection_id, NEW.document_id, NEW.withdrawn_at
    FROM knowledge_chunk WHERE id = NEW.chunk_id;
    RETURN NEW;
END $$;
DROP TRIGGER knowledge_embedding_collection ON knowledge_embedding;
CREATE TRIGGER knowledge_embedding_collection
    BEFORE INSERT OR UPDATE OF chunk_id, collection_id, document_id, withdrawn_at
    ON knowledge_embedding
    FOR EACH ROW EXECUTE FUNCTION knowledge_embedding_collection_set();

CREATE FUNCTION knowledge_document_withdrawn_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    withdrawn timestamptz := knowledge_withdrawn_at(NEW.enabled, NEW.status, NEW.expires_at);
BEGIN
    UPDATE knowledge_chunk SET withdrawn_at = withdrawn WHERE document_id = NEW.id;
    UPDATE knowledge_embedding SET withdrawn_at = withdrawn WHERE document_id = NEW.id;
    RETURN NULL;
END $$;
CREATE TRIGGER knowledge_document_withdrawn_changed
    AFTER UPDATE OF enabled, status, expires_at ON knowledge_document
    FOR EACH ROW WHEN (
        knowledge_withdrawn_at(OLD.enabled, OLD.status, OLD.expires_at)
        IS DISTINCT FROM knowledge_withdrawn_at(NEW.enabled, NEW.status, NEW.expires_at)
    )
    EXECUTE FUNCTION knowledge_document_withdrawn_changed();
"""

# The rows of documents that are withdrawn or carry an expiry date (the others stay NULL); the
# chunks' trigger computes the value from the document, the embeddings' from the chunk.
FILL = """
UPDATE knowledge_chunk AS c SET withdrawn_at = NULL
FROM knowledge_document AS d
WHERE d.id = c.document_id
  AND knowledge_withdrawn_at(d.enabled, d.status, d.expires_at) IS NOT NULL;
UPDATE knowledge_embedding AS e SET withdrawn_at = NULL
FROM knowledge_chunk AS c
WHERE c.id = e.chunk_id AND c.withdrawn_at IS NOT NULL;
"""

FUNCTIONS_DROP = """
DROP TRIGGER knowledge_document_withdrawn_changed ON knowledge_document;
DROP FUNCTION knowledge_document_withdrawn_changed();

CREATE OR REPLACE FUNCTION knowledge_chunk_collection_set() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SELECT collection_id INTO NEW.collection_id
    FROM knowledge_document WHERE id = NEW.document_id;
    RETURN NEW;
END $$;
DROP TRIGGER knowledge_chunk_collection ON knowledge_chunk;
CREATE TRIGGER knowledge_chunk_collection
    BEFORE INSERT OR UPDATE OF document_id, collection_id ON knowledge_chunk
    FOR EACH ROW EXECUTE FUNCTION knowledge_chunk_collection_set();

CREATE OR REPLACE FUNCTION knowledge_embedding_collection_set() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    SELECT collection_id, document_id INTO NEW.collection_id, NEW.document_id
    FROM knowledge_chunk WHERE id = NEW.chunk_id;
    RETURN NEW;
END $$;
DROP TRIGGER knowledge_embedding_collection ON knowledge_embedding;
CREATE TRIGGER knowledge_embedding_collection
    BEFORE INSERT OR UPDATE OF chunk_id, collection_id, document_id ON knowledge_embedding
    FOR EACH ROW EXECUTE FUNCTION knowledge_embedding_collection_set();

DROP FUNCTION knowledge_withdrawn_at(boolean, varchar, timestamptz);
"""


def _row_withdrawn_at() -> models.DateTimeField:
    return models.DateTimeField(
        editable=False,
        help_text="When its document is withdrawn from searches, kept by the database.",
        null=True,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0019_the_reader_reads_its_own_collections"),
    ]

    operations = [
        migrations.AddField(model_name="chunk", name="withdrawn_at", field=_row_withdrawn_at()),
        migrations.AddField(model_name="embedding", name="withdrawn_at", field=_row_withdrawn_at()),
        migrations.RunSQL(FUNCTIONS, FUNCTIONS_DROP),
        migrations.RunSQL(FILL, migrations.RunSQL.noop),
        migrations.RemoveIndex(model_name="embedding", name="embedding_collection_bits"),
        migrations.AddIndex(
            model_name="embedding",
            index=models.Index(
                fields=["collection"],
                include=("model", "document", "chunk", "vector_bits", "withdrawn_at"),
                name="embedding_collection_bits",
            ),
        ),
    ]
