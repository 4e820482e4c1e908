"""The record of the documents whose text reached each message (chat.DocumentGiven), and its
back-fill for the messages stored before it: the cited documents, the conversation's attached
files, every earlier answer's record, and `UNKNOWN_DOCUMENT` (0) for a text that may hold
passages nobody cited (docs/decisions/0130-an-answer-records-what-it-was-given.md)."""

import django.db.models.deletion
from django.db import migrations, models


ANSWERS = "('assistant', 'superseded')"
DRAWING = "('assistant', 'superseded', 'system-summary')"

BACKFILL = [
    # 1. What each answer cited (a citation whose document is unknown: UNKNOWN_DOCUMENT).
    """
    INSERT INTO chat_documentgiven (message_id, document_id)
    SELECT DISTINCT c.message_id, COALESCE(c.document_id_snapshot, k.document_id, 0)
    FROM chat_citation c LEFT JOIN knowledge_chunk k ON k.id = c.chunk_id
    ON CONFLICT DO NOTHING
    """,
    # 2. A text that may hold passages it does not cite: every generative answer (the model
    # may paraphrase any source it was given), an extractive one stopped or failed (its last
    # sentence streamed before its marker) and any answer with text and no citation.
    f"""
    INSERT INTO chat_documentgiven (message_id, document_id)
    SELECT m.id, 0 FROM chat_message m
    WHERE m.role IN {ANSWERS} AND m.content <> '' AND m.status <> 'refused'
      AND (m.mode = 'generative' OR m.status <> 'complete'
           OR NOT EXISTS (SELECT 1 FROM chat_citation c WHERE c.message_id = m.id))
    ON CONFLICT DO NOTHING
    """,
    # 3. The personal files attached to the conversation: every answer there searched them.
    f"""
    INSERT INTO chat_documentgiven (message_id, document_id)
    SELECT m.id, a.document_id
    FROM chat_message m JOIN chat_attachment a ON a.conversation_id = m.conversation_id
    WHERE m.role IN {DRAWING}
    ON CONFLICT DO NOTHING
    """,
    # 4. What every earlier answer of the conversation drew on (as recorded by 1-3: the
    # statement reads the table as it was before it): the turns given to a follow-up's prompt
    # and query, and what a summary folded in.
    f"""
    INSERT INTO chat_documentgiven (message_id, document_id)
    SELECT DISTINCT m.id, g.document_id
    FROM chat_message m
    JOIN chat_message e ON e.conversation_id = m.conversation_id AND e.role IN {ANSWERS}
      AND e.created_at < m.created_at
    JOIN chat_documentgiven g ON g.message_id = e.id
    WHERE m.role IN {DRAWING}
    ON CONFLICT DO NOTHING
    """,
]


class Migration(migrations.Migration):

    dependencies = [
        ('chat', '0020_message_columns_default_empty'),
    ]

    operations = [
        migrations.CreateModel(
            name='DocumentGiven',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('document_id', models.BigIntegerField()),
                ('message', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='documents_given', to='chat.message')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('message', 'document_id'), name='document_given_once_per_message')],
            },
        ),
        migrations.RunSQL(BACKFILL, reverse_sql=migrations.RunSQL.noop),
    ]
