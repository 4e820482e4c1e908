"""The sidebar's two reads each get an index of their own: the newest shared conversations
(`conv_shared_updated`) and each owner's newest private ones (`conv_private_owner_updated`),
in place of `conv_privacy_updated`, so neither reads conversations it does not show
(docs/decisions/0177-the-sidebar-reads-what-it-shows.md)."""

from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0022_message_searched_documents"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name="conversation",
            name="conv_privacy_updated",
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                condition=models.Q(("is_private", False)),
                fields=["-updated_at"],
                name="conv_shared_updated",
            ),
        ),
        migrations.AddIndex(
            model_name="conversation",
            index=models.Index(
                condition=models.Q(("is_private", True)),
                fields=["owner", "-updated_at"],
                name="conv_private_owner_updated",
            ),
        ),
    ]
