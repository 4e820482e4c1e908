"""Sources in the admin and in the worker: a site and a share configured by a superuser (its
credentials named, never stored), re-synced by the ingestion worker into their collections;
watched folders migrated into folder sources; and an outside check: a site nobody on the
project wrote (CPython's pydoc server) mirrored on loopback."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from io import StringIO

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django.urls import reverse

from knowledge.collections import collection_create
from knowledge.models import Document, Source, SyncRun
from tests.knowledge.test_site_sync import build_site
from tests.support.answers import collect
from tests.support.live_server import free_port
from tests.support.migrations import migrate, migrate_to_latest
from tests.support.sites import share_serving, site_serving

ADD_URL = reverse("admin:knowledge_source_add")
FAST = {"SOURCE_REQUESTS_PER_SECOND": 1000, "SOURCE_TIMEOUT_SECONDS": 5}


def worker_batch() -> None:
    """The ingestion worker, run until its queue is empty (the real loop, `--batch`)."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with override_settings(INGEST_WORKER_NICE=0, **FAST):
            call_command("ingest_worker", "--batch", "--no-startup-delay", stdout=StringIO())
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)


@pytest.mark.django_db
def test_a_superuser_adds_a_site_and_a_share_naming_their_credentials_variable(
    admin_client, monkeypatch
):
    monkeypatch.setenv("INTRANET_LOGIN", "reader:pa55word")

    unset = admin_client.post(
        ADD_URL,
        {"location": "https://Intranet.example.org/help/", "credentials_env": "NOPE_UNSET",
         "interval_minutes": 60, "enabled": "on"},
    )  # fmt: skip
    unknown = admin_client.post(ADD_URL, {"location": "ftp://host/x", "interval_minutes": 60})
    assert "NOPE_UNSET" in unset.content.decode() and "not set" in unset.content.decode()
    assert "Unknown kind of source ftp://" in unknown.content.decode()
    assert not Source.objects.exists()

    site = admin_client.post(
        ADD_URL,
        {"location": "https://Intranet.example.org:443/help/#top",
         "credentials_env": "INTRANET_LOGIN", "interval_minutes": 60, "enabled": "on"},
    )  # fmt: skip
    share = admin_client.post(
        ADD_URL,
        {"location": "webdavs://nas.example.org/team", "interval_minutes": 30, "enabled": "on"},
    )
    inside = admin_client.post(
        ADD_URL, {"location": "https://intranet.example.org/help/hr/", "interval_minutes": 60}
    )

    assert site.status_code == 302 and share.status_code == 302, site.content.decode()
    assert {(s.kind, s.location) for s in Source.objects.all()} == {
        ("site", "https://intranet.example.org/help/"),
        ("webdav", "webdavs://nas.example.org/team/"),
    }
    assert "overlaps the source https://intranet.example.org/help/" in inside.content.decode()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM knowledge_source s WHERE s::text LIKE '%%pa55%%'")
        assert cursor.fetchone()[0] == 0


def test_the_worker_resyncs_a_site_and_a_share_into_their_collections(
    tmp_path, monkeypatch, transactional_db
):
    hr = collection_create(name="HR only", groups=[])
    (tmp_path / "share").mkdir()
    (tmp_path / "share" / "leave.md").write_text("# Leave\n\nTwenty-five days a year.\n")
    monkeypatch.setenv("SHARE_LOGIN", "alice:secret")
    with (
        site_serving("127.0.0.1") as site,
        site_serving("127.0.0.2") as other,
        share_serving(tmp_path / "share", user="alice", password="secret") as dav,
    ):
        build_site(site, other)
        web = Source.objects.create(
            kind=Source.Kind.SITE, location=site.url("/help/"), collection=hr
        )
        share = Source.objects.create(
            kind=Source.Kind.WEBDAV,
            location=dav.location(),
            credentials_env="SHARE_LOGIN",
            interval_minutes=15,
        )

        worker_batch()

    site_run = web.runs.get()
    share_run = share.runs.get()
    assert (site_run.trigger, site_run.status, site_run.added) == ("worker", "finished", 5)
    assert (share_run.status, share_run.added) == ("finished", 1)
    assert set(
        Document.objects.filter(sync_root=web.location).values_list("collection", flat=True)
    ) == {hr.pk}
    assert Document.objects.get(sync_root=share.location).collection.is_default
    share.refresh_from_db()
    assert share.next_run_at > site_run.finished_at


def test_a_source_whose_credentials_variable_is_unset_gets_a_failed_run(transactional_db):
    source = Source.objects.create(
        kind=Source.Kind.WEBDAV,
        location="webdav://127.0.0.1:9/docs/",
        credentials_env="NOBODY_SET_THIS",
    )

    worker_batch()

    run = source.runs.get()
    assert run.status == SyncRun.Status.FAILED and "NOBODY_SET_THIS" in run.message


@pytest.mark.django_db
def test_a_source_page_shows_the_runs_log(admin_client):
    source = Source.objects.create(kind=Source.Kind.SITE, location="https://example.org/")
    SyncRun.objects.create(
        root=source.location,
        source=source,
        trigger="worker",
        status=SyncRun.Status.FINISHED,
        log=["Depth limit reached: 3 link(s) <b>not</b> followed."],
    )

    page = admin_client.get(reverse("admin:knowledge_source_change", args=[source.pk]))

    assert "Depth limit reached" in page.content.decode()
    assert "&lt;b&gt;not&lt;/b&gt;" in page.content.decode()


def test_watched_folders_are_migrated_into_folder_sources(transactional_db, tmp_path):
    try:
        old = migrate([("knowledge", "0014_document_withdrawn")])
        folder = old.get_model("knowledge", "WatchedFolder").objects.create(
            path=str(tmp_path), interval_minutes=45
        )
        old.get_model("knowledge", "SyncRun").objects.create(
            root=str(tmp_path), folder_id=folder.pk, trigger="worker", status="finished"
        )
    finally:
        migrate_to_latest()

    source = Source.objects.get()
    assert (source.pk, source.kind, source.location, source.interval_minutes) == (
        folder.pk,
        "folder",
        str(tmp_path),
        45,
    )
    assert source.runs.get().trigger == "worker"


def test_an_outside_site_is_mirrored_pydoc_on_loopback(transactional_db):
    """CPython's own documentation server: HTML nobody on the project wrote."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-c",
         f"import pydoc; pydoc.browse(port={port}, open_browser=False, hostname='127.0.0.1')"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "pydoc did not start"
                time.sleep(0.2)
        out = StringIO()
        with override_settings(
            SOURCE_MAX_PAGES=12, SOURCE_MAX_DEPTH=1, SOURCE_MAX_BYTES=200_000, **FAST
        ):
            call_command(
                "sync", f"http://127.0.0.1:{port}/json.html", stdout=out, stderr=StringIO()
            )
    finally:
        server.terminate()
        server.wait(timeout=10)

    documents = Document.objects.filter(sync_root=f"http://127.0.0.1:{port}/json.html")
    json_page = documents.get(source=f"http://127.0.0.1:{port}/json.html")
    assert documents.count() >= 5, out.getvalue()
    assert all(document.status == Document.Status.READY for document in documents)
    assert "json" in json_page.title.lower()
    assert "JSON" in " ".join(json_page.chunks.values_list("text", flat=True))
    assert not documents.exclude(source__startswith=f"http://127.0.0.1:{port}/").exists()
    assert "over the limit of 0.2 MB" in out.getvalue()  # builtins.html, 0.6 MB


@pytest.mark.django_db(transaction=True)
async def test_an_answer_from_a_site_cites_the_page_by_its_title_section_and_url(staff_user):
    with site_serving("127.0.0.1") as site, site_serving("127.0.0.2") as other:
        build_site(site, other)
        with override_settings(**FAST):
            await sync_to_async(call_command)(
                "sync", site.url("/help/"), stdout=StringIO(), stderr=StringIO()
            )

    events = await collect(
        user=staff_user, question="How many unused leave days may be carried over?"
    )

    sources = [event for event in events if event.type == "sources"]
    citations = sources[0].data["citations"] if sources else []
    leave = [c for c in citations if c["url"] == site.url("/help/leave")]
    assert leave, citations
    assert leave[0]["title"] == "Leave policy"
    assert leave[0]["section"] == "Leave policy > Carrying over"
