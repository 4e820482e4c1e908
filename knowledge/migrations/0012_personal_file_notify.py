"""A personal file whose status changes, or which is purged, is announced on the PostgreSQL
channel `personal_file_status` with its id as the payload, by whatever writes the row (the
worker's ingestion, a failure recorded later, the purge). NOTIFY is sent when the transaction
commits, so a listener that reads the row then sees the new state
(docs/decisions/0082-personal-file-progress-over-the-socket.md)."""

from django.db import migrations

TRIGGER = """
CREATE FUNCTION knowledge_personal_file_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('personal_file_status', NEW.id::text);
    RETURN NULL;
END $$;
CREATE TRIGGER knowledge_personal_file_status
    AFTER UPDATE OF status, purged_at ON knowledge_document
    FOR EACH ROW
    WHEN (NEW.owner_id IS NOT NULL AND (OLD.status IS DISTINCT FROM NEW.status
          OR OLD.purged_at IS DISTINCT FROM NEW.purged_at))
    EXECUTE FUNCTION knowledge_personal_file_notify();
"""

REVERSE = """
DROP TRIGGER IF EXISTS knowledge_personal_file_status ON knowledge_document;
DROP FUNCTION IF EXISTS knowledge_personal_file_notify();
"""


class Migration(migrations.Migration):
    dependencies = [("knowledge", "0011_personal_file_settings")]

    operations = [migrations.RunSQL(TRIGGER, REVERSE)]
