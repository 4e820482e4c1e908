"""The single ChatSettings row exists from the start."""

from django.db import migrations


def create_settings_row(apps, schema_editor):
    ChatSettings = apps.get_model("chat", "ChatSettings")
    ChatSettings.objects.get_or_create(pk=1)


class Migration(migrations.Migration):
    dependencies = [("chat", "0002_cache_table")]

    operations = [migrations.RunPython(create_settings_row, migrations.RunPython.noop)]
