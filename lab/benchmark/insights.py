"""The insights case (`manage.py bench_insights`): N stored exchanges spread over the last 90
days, bulk-loaded by SQL, then the insights page (`/admin/insights/`) loaded in-process through
Django's test client, for a superuser and for staff holding only the insights permission who
read 1 of the 5 collections, over the last 30 and 90 days, and the CSV export of 90 days.

The exchanges: conversations of USERS users (one in five private); outcomes 80% answered, 15%
refused (REFUSED_WORDINGS distinct questions), 5% failed; one in ten generative; 1 to 3
citations per answer over DOCUMENTS documents in COLLECTIONS collections; one answer in twenty
rated. Answers (~630 characters) and the citations' passages (~830) are as wide as real ones,
so that the rows the queries would otherwise read are. Figures:
docs/decisions/0120-insights-aggregated-in-sql.md.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.db import connection, transaction
from django.test import Client

from knowledge.collections import collection_create
from knowledge.models import Document, collection_default_id
from lab.benchmark.server import database_server_pid, process_tree_cpu_seconds

USERS = 200
DOCUMENTS = 500
COLLECTIONS = 5
REFUSED_WORDINGS = 2000
DAYS = 90
PAGES = (
    ("superuser", "days=30"),
    ("superuser", "days=90"),
    ("reader", "days=30"),
    ("reader", "days=90"),
    ("superuser", "days=90&by=day"),
)

Say = Callable[[str], None]


@dataclass(frozen=True)
class Loaded:
    exchanges: int
    citations: int
    ratings: int
    seconds: float


def _users_create(count: int) -> list[int]:
    users = get_user_model()
    made = users.objects.bulk_create(
        [users(username=f"bench-insights-{n}", is_staff=True, password="!") for n in range(count)]
    )
    return [user.pk for user in made]


def _documents_create(count: int) -> list[int]:
    """`count` ready documents over COLLECTIONS collections (General and restricted ones)."""
    collections = [collection_default_id()]
    for number in range(1, COLLECTIONS):
        group = Group.objects.create(name=f"bench-insights-{number}")
        collections.append(collection_create(name=f"bench-insights-{number}", groups=[group]).pk)
    made = Document.objects.bulk_create(
        [
            Document(
                title=f"Bench document {n:04d}",
                source=f"bench-insights:{n}",
                media_type="text/markdown",
                content_hash=f"{n:064d}",
                status=Document.Status.READY,
                collection_id=collections[n % COLLECTIONS],
            )
            for n in range(count)
        ]
    )
    return [document.pk for document in made]


_LOAD_SQL = """
WITH spread AS (
    SELECT g,
           gen_random_uuid() AS question_id,
           gen_random_uuid() AS answer_id,
           now() - random() * make_interval(days => %(days)s) AS at,
           (%(conversations)s::uuid[])[1 + g %% %(conversation_count)s] AS conversation_id,
           CASE WHEN g %% 100 < 15 THEN 'refused' WHEN g %% 100 < 20 THEN 'error'
                ELSE 'complete' END AS status
    FROM generate_series(1, %(exchanges)s) g
), questions AS (
    INSERT INTO chat_message (id, conversation_id, role, content, status, mode, suggestions,
                              warning, search_query, error_code, created_at, heartbeat_at)
    SELECT question_id, conversation_id, 'user',
           CASE WHEN status = 'refused' THEN 'Where is policy ' || (g %% %(wordings)s) || '?'
                ELSE 'Question ' || g END,
           'complete', '', '[]'::jsonb, '', '', '', at, at
    FROM spread
)
INSERT INTO chat_message (id, conversation_id, role, content, status, mode, suggestions, warning,
                          search_query, error_code, reply_to_id, top_k, best_similarity,
                          retrieval_ms, first_event_ms, total_ms, created_at, heartbeat_at)
SELECT answer_id, conversation_id, 'assistant',
       repeat('An answer sentence quoting a document. ', 16), status,
       CASE WHEN g %% 10 = 0 THEN 'generative' ELSE 'extractive' END, '[]'::jsonb, '', '', '',
       question_id, 5, 0.5, 20 + random() * 30,
       CASE WHEN status = 'error' THEN NULL ELSE 80 + random() * 400 END,
       CASE WHEN status = 'error' THEN NULL ELSE 300 + random() * 1500 END, at, at
FROM spread
"""

_CITATIONS_SQL = """
INSERT INTO chat_citation (message_id, n, similarity, document_id_snapshot, document_title, url,
                           text, text_hash)
SELECT m.id, n, 0.6, d.ids[1 + (abs(hashtext(m.id::text || n)) %% d.count)], 'Bench document',
       '', repeat('A cited passage of the document. ', 25), ''
FROM chat_message m
CROSS JOIN LATERAL generate_series(1, 1 + abs(hashtext(m.id::text)) %% 3) n
CROSS JOIN (SELECT %(documents)s::bigint[] AS ids, %(document_count)s AS count) d
WHERE m.role = 'assistant' AND m.status = 'complete'
"""

_RATINGS_SQL = """
INSERT INTO chat_feedback (user_id, message_id, rating, comment, created_at, updated_at)
SELECT c.owner_id, m.id, CASE WHEN abs(hashtext(m.id::text)) %% 4 = 0 THEN -1 ELSE 1 END, '',
       m.created_at, m.created_at
FROM chat_message m JOIN chat_conversation c ON c.id = m.conversation_id
WHERE m.role = 'assistant' AND m.status = 'complete' AND abs(hashtext(m.id::text)) %% 20 = 0
"""


# The tables the load fills: their secondary indexes are built once after it, not row by row.
_BULK_TABLES = ("chat_message", "chat_citation", "chat_feedback")


@contextmanager
def _indexes_built_after(cursor: Any, tables: tuple[str, ...]) -> Iterator[None]:
    """Drop the indexes of `tables` that are neither primary keys nor unique (those check the
    rows as they come) and create them again, as they were, when the block ends: one sorted
    build each instead of an insertion per row (the answers' full-text index alone halved the
    load). Inside the caller's transaction: whatever happens, nobody sees the tables without
    them. The foreign keys are checked first (an index cannot be created while checks wait),
    and at once for the rest of the transaction."""
    cursor.execute(
        "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
        "WHERE i.indrelid = ANY(%s::regclass[]) AND NOT i.indisprimary AND NOT i.indisunique",
        [list(tables)],
    )
    indexes = cursor.fetchall()
    for name, _ in indexes:
        cursor.execute(f"DROP INDEX {name}")
    yield
    cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
    cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")
    for _, definition in indexes:
        cursor.execute(definition)


def exchanges_load(
    *, exchanges: int, users: int = USERS, documents: int = DOCUMENTS, vacuum: bool = True
) -> Loaded:
    """Store `exchanges` exchanges (as described above) with their citations and ratings, in
    one transaction, then VACUUM ANALYZE the tables (as autovacuum would soon after), or only
    ANALYZE them without `vacuum` (inside a transaction: a test's)."""
    started = time.perf_counter()
    with transaction.atomic():
        user_ids = _users_create(users)
        document_ids = _documents_create(documents)
        conversation_count = max(1, exchanges // 10)
        with connection.cursor() as cursor, _indexes_built_after(cursor, _BULK_TABLES):
            cursor.execute(
                """
                INSERT INTO chat_conversation (id, owner_id, is_private, title, created_at,
                                               updated_at)
                SELECT gen_random_uuid(), (%s::bigint[])[1 + g %% %s], g %% 5 = 0,
                       'Bench conversation ' || g, now(), now()
                FROM generate_series(1, %s) g
                """,
                [user_ids, len(user_ids), conversation_count],
            )
            cursor.execute("SELECT array_agg(id) FROM chat_conversation")
            conversations = cursor.fetchone()[0]
            cursor.execute(
                _LOAD_SQL,
                {
                    "days": DAYS,
                    "conversations": conversations,
                    "conversation_count": len(conversations),
                    "exchanges": exchanges,
                    "wordings": REFUSED_WORDINGS,
                },
            )
            cursor.execute(
                _CITATIONS_SQL, {"documents": document_ids, "document_count": len(document_ids)}
            )
            citations = cursor.rowcount
            cursor.execute(_RATINGS_SQL, {})
            ratings = cursor.rowcount
    with connection.cursor() as cursor:
        for table in ("chat_message", "chat_citation", "chat_feedback", "chat_conversation"):
            cursor.execute(f"{'VACUUM ANALYZE' if vacuum else 'ANALYZE'} {table}")
    return Loaded(
        exchanges=exchanges,
        citations=citations,
        ratings=ratings,
        seconds=time.perf_counter() - started,
    )


def viewers_create() -> dict[str, Any]:
    """A superuser, and staff holding only `chat.view_insights` who read the first restricted
    collection only (through its group)."""
    users = get_user_model().objects
    reader = users.create_user(username="bench-insights-reader", is_staff=True)
    reader.user_permissions.add(Permission.objects.get(codename="view_insights"))
    reader.groups.add(Group.objects.get(name="bench-insights-1"))
    return {
        "superuser": users.create_superuser(
            username="bench-insights-root", email="", password=None
        ),
        "reader": reader,
    }


def _cpu_seconds(database_pid: int | None) -> tuple[float, float | None]:
    """CPU seconds used so far by this process (the page's Python) and by the PostgreSQL
    server's processes."""
    database = None if database_pid is None else process_tree_cpu_seconds(database_pid)
    return time.process_time(), database


def page_times(*, viewers: dict[str, Any], rounds: int) -> dict[str, dict[str, float]]:
    """Each of PAGES loaded `rounds` times after one warm-up load (the embedding model, the
    template cache): median and slowest milliseconds, the CPU milliseconds of one load (the
    median, Python and PostgreSQL together: what the machine's load does not change), and
    the database statements of one load."""
    from django.db import reset_queries
    from django.test.utils import CaptureQueriesContext

    database_pid = database_server_pid()
    figures = {}
    for who, query in PAGES:
        client = Client()
        client.force_login(viewers[who])
        url = f"/admin/insights/?{query}"
        response = client.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"{url} answered {response.status_code} for {who}")
        times, cpu, database_cpu = [], [], []
        for _ in range(rounds):
            python_before, database_before = _cpu_seconds(database_pid)
            started = time.perf_counter()
            client.get(url)
            times.append((time.perf_counter() - started) * 1000)
            python_after, database_after = _cpu_seconds(database_pid)
            cpu.append((python_after - python_before) * 1000)
            if database_before is not None and database_after is not None:
                database_cpu.append((database_after - database_before) * 1000)
        reset_queries()
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
        figures[f"{who} {query}"] = {
            "median_ms": round(statistics.median(times), 1),
            "max_ms": round(max(times), 1),
            "python_cpu_ms": round(statistics.median(cpu), 1),
            "database_cpu_ms": round(statistics.median(database_cpu), 1) if database_cpu else None,
            "statements": len(queries),
        }
    return figures


def export_time(*, viewer: Any) -> dict[str, float]:
    """The CSV export of the last 90 days, read whole: milliseconds, rows and bytes."""
    client = Client()
    client.force_login(viewer)
    started = time.perf_counter()
    response = client.get("/admin/insights/export.csv?days=90")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the sync client reading an async stream
        body = b"".join(response)
    return {
        "ms": round((time.perf_counter() - started) * 1000, 1),
        "rows": body.count(b"\n") - 1,
        "mb": round(len(body) / 1e6, 1),
    }


def insights_measure(*, exchanges: int, rounds: int, say: Say) -> dict[str, Any]:
    """Load `exchanges` exchanges into the current (throwaway) database and time the page and
    the export; the figures."""
    say(f"Loading {exchanges:,} exchanges…")
    loaded = exchanges_load(exchanges=exchanges)
    say(f"Loaded in {loaded.seconds:.1f} s; timing the page ({rounds} loads each)…")
    viewers = viewers_create()
    return {
        "exchanges": loaded.exchanges,
        "citations": loaded.citations,
        "ratings": loaded.ratings,
        "load_s": round(loaded.seconds, 1),
        "pages": page_times(viewers=viewers, rounds=rounds),
        "export": export_time(viewer=viewers["superuser"]),
    }


def insights_report(figures: dict[str, Any]) -> str:
    """The figures as the plain text `bench_insights` prints."""
    lines = [
        f"Insights page with {figures['exchanges']:,} exchanges "
        f"({figures['citations']:,} citations, {figures['ratings']:,} ratings; "
        f"loaded in {figures['load_s']} s), load average {figures.get('load_average')}:",
    ]
    for name, page in figures["pages"].items():
        database = page["database_cpu_ms"]
        lines.append(
            f"  {name:<26} median {page['median_ms']:>7.1f} ms  slowest {page['max_ms']:>7.1f} ms"
            f"  CPU {page['python_cpu_ms']:>6.1f} ms Python + "
            f"{'?' if database is None else f'{database:.1f}'} ms PostgreSQL"
            f"  {page['statements']} statements"
        )
    export = figures["export"]
    lines.append(
        f"  CSV export, 90 days: {export['rows']:,} rows, {export['mb']} MB "
        f"in {export['ms']:.0f} ms"
    )
    return "\n".join(lines)
