"""The insights page stays fast with 100,000 exchanges: its figures are aggregated in
PostgreSQL in a fixed number of statements, whatever the number of exchanges
(docs/decisions/0120-insights-aggregated-in-sql.md). The exchanges are bulk-loaded by the
bench's own loader (lab/benchmark/insights.py; `manage.py bench_insights` prints the figures).
The time bound is generous, for a loaded machine; the statement count is exact."""

from __future__ import annotations

import time

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from chat.models import Message
from lab.benchmark.insights import exchanges_load, viewers_create

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

EXCHANGES = 100_000
# Seconds, for a machine shared with other work (the bench measures 0.7-0.85 s of CPU a load:
# docs/decisions/0120-insights-aggregated-in-sql.md).
BOUND_S = 10.0


def test_the_page_loads_within_the_bound_with_100000_exchanges():
    loaded = exchanges_load(exchanges=EXCHANGES, vacuum=False)
    assert loaded.exchanges == EXCHANGES
    viewers = viewers_create()

    for who in ("superuser", "reader"):
        client = Client()
        client.force_login(viewers[who])
        client.get("/admin/insights/?days=90")  # warm-up: the embedding model, templates
        started = time.perf_counter()
        with CaptureQueriesContext(connection) as queries:
            response = client.get("/admin/insights/?days=90")
        elapsed = time.perf_counter() - started

        assert response.status_code == 200
        page = response.context["page"]
        # The loader spreads the exchanges over the last 90 × 24 hours; the page's 90 days start
        # at midnight 89 days ago, so those before it (up to a day's worth) are left out.
        in_period = Message.objects.filter(
            role=Message.Role.ASSISTANT,
            reply_to__isnull=False,
            created_at__gte=page.period.start,
            created_at__lt=page.period.end,
        ).count()
        assert in_period > EXCHANGES * 88 / 90
        assert page.figures.total.exchanges == in_period
        print(f"{who}: {elapsed * 1000:.0f} ms, {len(queries)} statements")
        assert elapsed < BOUND_S, who
        # The session and the user (2), the viewer's Reader (1), and in a transaction each
        # (here a savepoint and its release, +2, and SET LOCAL work_mem, +1): the period's
        # exchanges and ratings (2), the period before's (2), the documents (1); then the
        # unanswered wordings (1). Non-superusers: their two permission lookups (has_perm).
        expected = 18 if who == "superuser" else 20
        assert len(queries) == expected, [q["sql"][:80] for q in queries]
