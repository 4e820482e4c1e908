# Watched folders become sources (a folder, a web site or a WebDAV share): the table and its
# rows are kept (RenameModel), each existing row is a folder (RunPython below), runs point at
# their source.

import django.core.validators
import django.db.models.deletion
import django.utils.timezone
import knowledge.models
from django.db import migrations, models


def watched_folders_are_folder_sources(apps, schema_editor):
    """Every row that existed before this migration was a watched folder."""
    Source = apps.get_model("knowledge", "Source")
    Source.objects.exclude(location__contains="://").update(kind="folder")


class Migration(migrations.Migration):

    dependencies = [
        ("knowledge", "0014_document_withdrawn"),
    ]

    operations = [
        migrations.RemoveIndex(model_name="syncrun", name="knowledge_s_folder__55add6_idx"),
        migrations.RenameModel("WatchedFolder", "Source"),
        migrations.RenameField("source", "path", "location"),
        migrations.RenameField("syncrun", "folder", "source"),
        migrations.AddField(
            model_name="source",
            name="kind",
            field=models.CharField(
                choices=[("folder", "Folder"), ("site", "Web site"), ("webdav", "WebDAV share")],
                default="folder",
                editable=False,
                help_text="Decided by the location: a path, an http(s):// URL or a webdav(s):// URL.",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="source",
            name="credentials_env",
            field=models.CharField(
                blank=True,
                help_text="Sites and WebDAV shares: the name of an environment variable of the server holding the credentials, user:password (basic) or Bearer TOKEN. The credentials themselves are never stored.",
                max_length=100,
                verbose_name="credentials variable",
            ),
        ),
        migrations.AddField(
            model_name="syncrun",
            name="log",
            field=models.JSONField(
                blank=True,
                default=list,
                help_text="Lines about what a site or share sync left out: bounds reached (pages, depth, size, time), robots.txt, redirects out of scope, wrong content types.",
            ),
        ),
        migrations.AlterModelOptions(
            name='source',
            options={'ordering': ['location']},
        ),
        migrations.AlterField(
            model_name='document',
            name='sync_root',
            field=models.CharField(blank=True, db_index=True, default='', help_text='The folder, site or WebDAV share a sync mirrors the document from (`manage.py sync`, a source): the sync re-reads it when its file or page changes and deletes it when it leaves. Empty: uploaded or ingested otherwise; no sync ever touches it.', max_length=1000, verbose_name='synced from'),
        ),
        migrations.AlterField(
            model_name='source',
            name='collection',
            field=models.ForeignKey(default=knowledge.models.collection_default_id, help_text='New documents from the source are created in this collection; documents already synced keep theirs (move them from the document list).', on_delete=django.db.models.deletion.PROTECT, related_name='sources', to='knowledge.collection'),
        ),
        migrations.AlterField(
            model_name='source',
            name='interval_minutes',
            field=models.PositiveIntegerField(default=60, help_text='The worker re-scans the source this often.', validators=[django.core.validators.MinValueValidator(1), django.core.validators.MaxValueValidator(10080)], verbose_name='interval (minutes)'),
        ),
        migrations.AlterField(
            model_name='source',
            name='location',
            field=models.CharField(help_text="An absolute folder path on the machine the ingestion worker runs on (walked recursively), a site's start URL (https://intranet.example.org/handbook/: the pages under its path), or a WebDAV folder as webdavs://host/path/ (https) or webdav://host/path/ (plain http).", max_length=1000, unique=True),
        ),
        migrations.AlterField(
            model_name='source',
            name='next_run_at',
            field=models.DateTimeField(db_index=True, default=django.utils.timezone.now, help_text='When the worker re-scans the source next.'),
        ),
        migrations.AlterField(
            model_name='syncrun',
            name='root',
            field=models.CharField(db_index=True, help_text='The folder, site or share synced.', max_length=1000),
        ),
        migrations.AddIndex(
            model_name="syncrun",
            index=models.Index(fields=["source", "-started_at"], name="knowledge_s_source__cdee88_idx"),
        ),
        migrations.RunPython(watched_folders_are_folder_sources, migrations.RunPython.noop),
    ]
