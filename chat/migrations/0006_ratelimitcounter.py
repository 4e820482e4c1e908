from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0005_message_search_query"),
    ]

    operations = [
        migrations.CreateModel(
            name="RateLimitCounter",
            fields=[
                (
                    "key",
                    models.CharField(max_length=200, primary_key=True, serialize=False),
                ),
                (
                    "window_start",
                    models.BigIntegerField(help_text="Unix time the counted window began."),
                ),
                ("count", models.PositiveIntegerField(default=0)),
            ],
        ),
    ]
