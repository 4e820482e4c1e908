from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="document",
            name="reprocessing_since",
            field=models.DateTimeField(
                blank=True,
                help_text="When re-processing of this ready document was queued or started "
                "(empty when none is under way). Its last good version stays searchable "
                "meanwhile.",
                null=True,
            ),
        ),
        migrations.AlterField(
            model_name="document",
            name="error",
            field=models.TextField(
                blank=True,
                help_text="Why the last processing failed. A ready document whose "
                "re-processing failed keeps its last good version searchable and shows the "
                "error here.",
            ),
        ),
    ]
