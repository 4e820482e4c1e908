"""Site sync (`manage.py sync https://…`, knowledge/sources/web.py) against a real web site on
loopback (tests/support/sites.py): a sitemap, robots.txt, linked pages, a disallowed path, a
page out of scope, a page on another host, ETags, a page that disappears, hostile pages."""

from __future__ import annotations

import hashlib
import time
from contextlib import contextmanager
from io import StringIO

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings

from knowledge.models import Chunk, Document, SyncRun
from knowledge.services import document_write
from tests.support.documents import pdf_bytes
from tests.support.sites import Page, Site, site_serving

pytestmark = pytest.mark.django_db

FAST = {"SOURCE_REQUESTS_PER_SECOND": 1000, "SOURCE_TIMEOUT_SECONDS": 2}


def page(title: str, body: str, *, links: list[str] = (), head: str = "") -> str:
    anchors = "".join(f'<li><a href="{href}">{href}</a></li>' for href in links)
    return (
        f"<!doctype html><html><head><title>{title} | Example intranet</title>{head}</head>"
        f"<body><nav><ul>{anchors}</ul></nav><main>{body}</main>"
        "<footer>© Example Ltd. All rights reserved.</footer></body></html>"
    )


LEAVE = page(
    "Leave policy",
    "<h1>Leave policy</h1><p>Full-time staff receive twenty-five days of paid annual leave "
    "each year, booked in agreement with their line manager.</p>"
    "<h2>Carrying over</h2><p>Up to five unused days may be carried over into the next year "
    "and must be taken before the end of March.</p>"
    "<h2>Sick leave</h2><p>Report sickness to your manager before ten o'clock on the first "
    "day; a doctor's note is needed after seven calendar days.</p>",
    links=["/help/", "/help/travel"],
    head='<link rel="canonical" href="/help/leave">',
)
EXPENSES = page(
    "Expenses",
    "<h1>Expenses</h1><p>Claims for travel and subsistence are submitted within thirty days "
    "of the expense, with every receipt attached to the claim form.</p>",
)
TRAVEL = page(
    "Travel",
    "<h1>Business travel</h1><p>Rail travel is booked in standard class; first class is only "
    "allowed for journeys longer than four hours, approved by a director.</p>",
)


def build_site(site: Site, other: Site) -> None:
    """The help centre under /help/ of `site`; `other` is another host it links to."""
    site.pages.update(
        {
            "/robots.txt": Page(
                "User-agent: *\nDisallow: /help/private/\n"
                f"Sitemap: {site.origin}/sitemap.xml\nSitemap: {other.origin}/sitemap.xml\n",
                content_type="text/plain",
            ),
            "/sitemap.xml": Page(
                '<?xml version="1.0" encoding="UTF-8"?>'
                '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f"<url><loc>{site.origin}/help/leave</loc></url>"
                f"<url><loc>{site.origin}/help/expenses</loc></url>"
                f"<url><loc>{site.origin}/outside/page</loc></url>"
                f"<url><loc>{other.origin}/help/elsewhere</loc></url>"
                "</urlset>",
                content_type="application/xml",
            ),
            "/help/": Page(
                page(
                    "Help centre",
                    "<h1>Help centre</h1><p>Answers to the questions staff ask most often "
                    "about leave, travel and expenses at Example.</p>",
                    links=[
                        "/help/leave?ref=home",
                        "/help/private/salaries",
                        "/outside/other",
                        f"{other.origin}/help/elsewhere",
                        "/help/handbook.pdf",
                        "/help/logo.png",
                        "/help/old-travel",
                        "/help/index.html",
                        "mailto:help@example.org",
                    ],
                )
            ),
            "/help/leave": Page(LEAVE),
            "/help/leave?ref=home": Page(LEAVE),
            "/help/expenses": Page(EXPENSES),
            "/help/travel": Page(TRAVEL),
            "/help/old-travel": Page(status=301, location="/help/travel"),
            "/help/private/salaries": Page(page("Salaries", "<h1>Salaries</h1><p>Secret.</p>")),
            "/outside/other": Page(page("Outside", "<h1>Outside</h1><p>Not ours.</p>")),
            "/outside/page": Page(page("Outside", "<h1>Outside</h1><p>Not ours.</p>")),
            "/help/handbook.pdf": Page(pdf_bytes(), content_type="application/pdf"),
            "/help/logo.png": Page(b"\x89PNG\r\n\x1a\n" + b"\0" * 64, content_type="image/png"),
        }
    )
    site.pages["/help/index.html"] = site.pages["/help/"]  # the same page, no canonical
    other.pages["/help/elsewhere"] = Page(page("Elsewhere", "<h1>Elsewhere</h1><p>x</p>"))
    other.pages["/sitemap.xml"] = Page("<urlset/>", content_type="application/xml")


@pytest.fixture
def sites():
    with site_serving("127.0.0.1") as site, site_serving("127.0.0.2") as other:
        build_site(site, other)
        yield site, other


def sync(*args: str) -> str:
    out = StringIO()
    with override_settings(**FAST):
        call_command("sync", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def sync_failing(*args: str) -> tuple[CommandError, str]:
    out = StringIO()
    with pytest.raises(CommandError) as caught, override_settings(**FAST):
        call_command("sync", *args, stdout=out, stderr=StringIO())
    return caught.value, out.getvalue()


def synced(site: Site) -> dict[str, Document]:
    return {
        document.source.removeprefix(site.origin): document
        for document in Document.objects.filter(sync_root=site.url("/help/"))
    }


def test_a_site_is_mirrored_from_its_sitemap_and_links_within_its_scope_only(sites):
    site, other = sites

    output = sync(site.url("/help/"))

    documents = synced(site)
    assert sorted(documents) == [
        "/help/",
        "/help/expenses",
        "/help/handbook.pdf",
        "/help/leave",
        "/help/travel",
    ], output
    assert all(document.status == Document.Status.READY for document in documents.values())
    assert "5 added" in output
    # robots.txt obeyed, the scope kept, the other host never asked.
    assert site.requested("/help/private") == []
    assert site.requested("/outside") == []
    assert other.requests == []
    assert "robots.txt disallows" in output
    # The run is recorded, with its log.
    run = SyncRun.objects.get(root=site.url("/help/"))
    assert (run.status, run.added) == (SyncRun.Status.FINISHED, 5)
    assert any("another host" in line for line in run.log)


def test_a_page_is_cited_by_its_title_and_url_with_its_headings_as_sections(sites):
    site, _other = sites

    sync(site.url("/help/"))

    leave = synced(site)["/help/leave"]
    assert leave.title == "Leave policy"
    assert leave.url == site.url("/help/leave")
    sections = set(leave.chunks.values_list("section", flat=True))
    assert "Leave policy > Carrying over" in sections and "Leave policy > Sick leave" in sections
    text = " ".join(leave.chunks.values_list("text", flat=True))
    assert "twenty-five days" in text
    assert "All rights reserved" not in text and "/help/travel" not in text  # boilerplate out
    pdf = synced(site)["/help/handbook.pdf"]
    assert pdf.media_type == "application/pdf" and pdf.chunks.exists()


def test_canonical_urls_and_redirects_within_scope_give_one_document_per_page(sites):
    site, _other = sites

    sync(site.url("/help/"))

    assert site.requested("/help/leave?ref=home")  # fetched, and stored under its canonical
    assert site.requested("/help/old-travel")  # redirected to /help/travel
    assert site.requested("/help/index.html")  # the start page again: the same content
    sources = set(synced(site))
    assert "/help/leave?ref=home" not in sources and "/help/old-travel" not in sources
    assert "/help/index.html" not in sources
    assert Document.objects.filter(title="Leave policy").count() == 1


def test_an_unchanged_second_sync_asks_with_etags_and_rereads_nothing(sites):
    site, _other = sites
    sync(site.url("/help/"))
    chunk_ids = set(Chunk.objects.values_list("pk", flat=True))
    site.requests.clear()

    output = sync(site.url("/help/"))

    assert "0 added, 0 updated, 0 moved, 0 removed, 5 unchanged" in output
    conditional = [path for _, path, headers in site.requests if "If-None-Match" in headers]
    assert "/help/leave" in conditional and "/help/handbook.pdf" in conditional
    assert set(Chunk.objects.values_list("pk", flat=True)) == chunk_ids


def test_a_changed_page_is_reread_a_vanished_one_removed_and_a_failing_one_kept(sites):
    site, _other = sites
    sync(site.url("/help/"))
    before = synced(site)
    site.pages["/help/leave"] = Page(LEAVE.replace("twenty-five", "thirty"))
    site.pages["/help/expenses"] = Page("<h1>Gone</h1>", status=410)
    site.pages["/help/travel"] = Page("<h1>Oops</h1>", status=503)

    error, output = sync_failing(site.url("/help/"))

    after = synced(site)
    assert "1 updated" in output and "1 removed" in output and "1 failed" in output
    assert "/help/expenses" not in after
    assert after["/help/leave"].pk == before["/help/leave"].pk
    assert "thirty days" in " ".join(after["/help/leave"].chunks.values_list("text", flat=True))
    assert after["/help/travel"].pk == before["/help/travel"].pk  # a 5xx changes nothing
    assert "503" in output


def test_a_page_moved_to_a_new_url_keeps_its_document(sites):
    site, _other = sites
    sync(site.url("/help/"))
    travel = synced(site)["/help/travel"]
    site.pages["/help/business-travel"] = site.pages.pop("/help/travel")
    site.pages["/help/old-travel"] = Page(status=301, location="/help/business-travel")
    site.pages["/help/leave"] = Page(LEAVE.replace("/help/travel", "/help/business-travel"))

    output = sync(site.url("/help/"))

    assert "1 moved" in output, output
    moved = synced(site)["/help/business-travel"]
    assert moved.pk == travel.pk and moved.url == site.url("/help/business-travel")


def test_a_site_that_is_down_changes_nothing(sites):
    site, _other = sites
    sync(site.url("/help/"))
    site.pages["/robots.txt"] = Page("down", status=503, content_type="text/plain")

    error, _output = sync_failing(site.url("/help/"))

    assert "robots.txt" in str(error) and "503" in str(error)
    assert len(synced(site)) == 5
    run = SyncRun.objects.filter(root=site.url("/help/")).first()
    assert run.status == SyncRun.Status.FAILED and "503" in run.message


def test_a_dry_run_lists_what_it_would_do_and_writes_nothing(sites):
    site, _other = sites

    output = sync(site.url("/help/"), "--dry-run")

    assert f"add     {site.url('/help/leave')}" in output
    assert "Would add 5" in output
    assert not Document.objects.exists() and not SyncRun.objects.exists()


def test_a_link_maze_stops_at_the_depth_limit_with_a_line_in_the_log(sites):
    site, _other = sites
    site.pages["/help/"] = Page(page("Help", "<h1>Help</h1><p>Start here.</p>", links=["m/1"]))

    def maze(path: str) -> Page:
        n = int(path.rsplit("/", 1)[1].split("?")[0])
        body = f"<h1>Room {n}</h1><p>Room {n} of the maze has doors to rooms {n + 1} and on.</p>"
        return Page(page(f"Room {n}", body, links=[f"/help/m/{n + 1}", f"/help/m/{n + 2}?a"]))

    site.generated["/help/m/"] = maze
    started = time.monotonic()

    with override_settings(SOURCE_MAX_DEPTH=4):
        output = sync(site.url("/help/"))

    rooms = [source for source in synced(site) if source.startswith("/help/m/")]
    numbers = {int(room.removeprefix("/help/m/").split("?")[0]) for room in rooms}
    # Room 1 is 1 link from the start, and each link goes at most 2 rooms on: 4 links deep
    # reach room 7 at most.
    assert numbers and max(numbers) <= 7
    assert "Depth limit reached" in output
    assert time.monotonic() - started < 60
    # The next run does not go deeper: each page remembers its depth.
    with override_settings(SOURCE_MAX_DEPTH=4):
        sync(site.url("/help/"))
    assert {s for s in synced(site) if s.startswith("/help/m/")} == set(rooms)


def test_an_endless_calendar_stops_at_the_page_budget(sites):
    site, _other = sites
    site.pages["/help/"] = Page(page("Help", "<h1>Help</h1><p>Start.</p>", links=["cal?m=0"]))

    def calendar(path: str) -> Page:
        month = int(path.split("=")[1])
        body = f"<h1>Month {month}</h1><p>Nothing happens in month {month} of the calendar.</p>"
        return Page(page(f"Month {month}", body, links=[f"/help/cal?m={month + 1}"]))

    site.generated["/help/cal"] = calendar

    with override_settings(SOURCE_MAX_PAGES=12, SOURCE_MAX_DEPTH=1000):
        output = sync(site.url("/help/"))

    assert len(site.requests) <= 12 + 2  # the budget; robots.txt and the sitemap aside
    assert "Page budget reached" in output


def test_huge_slow_hanging_and_mistyped_pages_stop_at_their_bounds(sites):
    site, _other = sites
    links = ["/help/huge", "/help/streamed", "/help/drip", "/help/hang", "/help/binary"]
    site.pages["/help/"] = Page(page("Help", "<h1>Help</h1><p>Start here.</p>", links=links))
    big = page("Huge", "<h1>Huge</h1>" + "<p>All work and no play.</p>" * 60_000)
    site.pages["/help/huge"] = Page(big)
    site.pages["/help/streamed"] = Page(big, length=False)
    site.pages["/help/drip"] = Page(
        page("Drip", "<h1>Drip</h1><p>" + "z" * 400 + "</p>"), drip=0.05
    )
    site.pages["/help/hang"] = Page(page("Hang", "<h1>Hang</h1>"), delay=30)
    site.pages["/help/binary"] = Page(bytes(range(256)) * 50)
    started = time.monotonic()

    with override_settings(SOURCE_MAX_BYTES=500_000, SOURCE_RESPONSE_SECONDS=2):
        # The page that hangs timed out: a network failure, reported (and never removed).
        _error, output = sync_failing(site.url("/help/"))

    assert time.monotonic() - started < 30
    assert not set(synced(site)) & set(links)
    assert output.count("over the limit of 0.5 MB") == 2
    assert "took longer than 2 s" in output or "no complete response within 2 s" in output
    assert "/help/hang" in output and "timed out" in output
    assert "holds binary data" in output
    run = SyncRun.objects.get()
    assert any("SOURCE_MAX_BYTES" in line for line in run.log)


def test_redirect_loops_and_redirects_out_of_scope_are_logged_and_not_followed(sites):
    site, other = sites
    links = ["/help/loop-a", "/help/away", "/help/far"]
    site.pages["/help/"] = Page(page("Help", "<h1>Help</h1><p>Start here.</p>", links=links))
    site.pages["/help/loop-a"] = Page(status=302, location="/help/loop-b")
    site.pages["/help/loop-b"] = Page(status=302, location="/help/loop-a")
    site.pages["/help/away"] = Page(status=302, location="/outside/page")
    site.pages["/help/far"] = Page(status=302, location=f"{other.origin}/help/elsewhere")

    output = sync(site.url("/help/"))

    assert "redirects in a loop" in output
    assert output.count("redirects out of scope") == 2
    assert site.requested("/outside") == [] and other.requests == []


def test_credentials_come_from_the_environment_and_never_reach_the_database(sites, monkeypatch):
    site, _other = sites
    site.required_headers = {"Authorization": "Bearer s3cret-token"}
    monkeypatch.setenv("INTRANET_TOKEN", "Bearer s3cret-token")

    error, _ = sync_failing(site.url("/help/"))
    assert "401" in str(error)
    output = sync(site.url("/help/"), "--credentials-env", "INTRANET_TOKEN")

    assert "5 added" in output
    monkeypatch.delenv("INTRANET_TOKEN")
    error, _ = sync_failing(site.url("/help/"), "--credentials-env", "INTRANET_TOKEN")
    assert "INTRANET_TOKEN" in str(error) and "not set" in str(error)
    with connection.cursor() as cursor:
        for table in ("knowledge_document", "knowledge_syncrun", "knowledge_source"):
            cursor.execute(f"SELECT count(*) FROM {table} t WHERE t::text LIKE %s", ["%s3cret%"])
            assert cursor.fetchone()[0] == 0, table


def test_a_site_sync_interrupted_half_way_is_finished_by_the_next_run(sites, monkeypatch):
    site, _other = sites
    sync(site.url("/help/"))
    for path in ("/help/leave", "/help/expenses", "/help/travel"):
        site.pages[path] = Page(
            site.pages[path].data.replace(b"</main>", b"<p>Revised.</p></main>")
        )
    real_write = document_write._write
    written: list[str] = []

    def write_then_die(job):
        if written:
            raise SystemExit("killed")  # not an Exception: nothing in ingestion catches it
        written.append(job.source)
        return real_write(job)

    monkeypatch.setattr(document_write, "_write", write_then_die)
    with pytest.raises(SystemExit):
        sync(site.url("/help/"))
    monkeypatch.undo()
    assert SyncRun.objects.latest("started_at").status == SyncRun.Status.RUNNING

    output = sync(site.url("/help/"))

    assert "2 updated" in output, output
    statuses = list(SyncRun.objects.order_by("started_at").values_list("status", flat=True))
    assert statuses == ["finished", "interrupted", "finished"]


def test_a_second_sync_of_the_same_site_at_once_is_refused(sites):
    site, _other = sites
    with _lock_held(site.url("/help/")):
        error, _ = sync_failing(site.url("/help/"))

    assert "Another sync" in str(error)
    assert not Document.objects.exists()


@contextmanager
def _lock_held(root: str):
    """The sync lock of `root` held by another database connection, as another process."""
    connection.ensure_connection()
    params = connection.get_connection_params()
    with psycopg.connect(**params, autocommit=True) as other:
        digest = hashlib.sha256(b"sourced-folder-sync:" + root.encode()).digest()
        other.execute(
            "SELECT pg_advisory_lock(%s)", [int.from_bytes(digest[:8], "big", signed=True)]
        )
        yield


def test_re_processing_a_page_on_its_own_keeps_it_and_says_the_source_rereads_it(sites):
    """A page has no file to read again: re-processing it alone keeps its version searchable
    and says that its source's next sync reads it again, not that a file went missing."""
    from knowledge.services.ingest import document_process

    site, _other = sites
    sync(site.url("/help/"))
    leave = synced(site)["/help/leave"]
    chunks = leave.chunks.count()

    outcome = document_process(document=leave)

    leave.refresh_from_db()
    assert leave.status == Document.Status.READY and leave.chunks.count() == chunks
    assert "read again from there by the source's next sync" in leave.error, outcome
    assert "upload it again" not in leave.error
