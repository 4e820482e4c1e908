from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0004_citation_chunk_id_snapshot"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="search_query",
            field=models.TextField(blank=True),
        ),
    ]
