"""The insights' CSV export (`/admin/insights/export.csv`): one row per exchange of the period,
its columns, private questions absent, cells a spreadsheet would run as formulas neutralised."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from chat.insights.export import cell_neutralise
from chat.insights.selectors import EXPORT_COLUMNS
from tests.support.insights import (
    CAR_PARK,
    PRIVATE_QUESTION,
    SHARED_REFUSED,
    TUESDAY,
    at,
    exchange_at,
    insights_scenario,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def scenario():
    return insights_scenario()


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(
        get_user_model().objects.create_superuser(username="root", email="", password=None)
    )
    return client


def _export(client: Client, **params) -> tuple[object, list[dict]]:
    response = client.get(reverse("insights:export"), params)
    assert response.status_code == 200
    # An asynchronous stream (sent as it is read under ASGI), read here by the sync client.
    assert response.is_async
    with pytest.warns(Warning, match="must consume asynchronous iterators"):
        text = b"".join(response).decode()
    rows = list(csv.reader(io.StringIO(text)))
    assert tuple(rows[0]) == EXPORT_COLUMNS
    return response, [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]


def test_one_row_per_exchange_of_the_period_with_its_columns(scenario, admin_client):
    response, rows = _export(admin_client, **{"from": "2026-03-02", "to": "2026-03-10"})

    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == (
        'attachment; filename="sourced-exchanges-2026-03-02-2026-03-10.csv"'
    )
    assert len(rows) == 7  # the exchange of February is outside the period
    first = rows[0]
    assert first == {
        "time": "2026-03-02T10:00:00+00:00",
        "user": "anna",
        "conversation": str(scenario.users["anna"].conversations.get(is_private=False).pk),
        "visibility": "shared",
        "mode": "extractive",
        "outcome": "complete",
        "first_event_ms": "100.0",
        "total_ms": "300.0",
        "citations": "1",
        "thumbs_up": "2",
        "thumbs_down": "0",
        "question": "How many days of leave do I get?",
    }
    assert [row["time"][:13] for row in rows] == sorted(row["time"][:13] for row in rows)
    assert [row["outcome"] for row in rows] == [
        "complete",
        "complete",
        "refused",
        "complete",
        "refused",
        "error",
        "refused",
    ]
    assert [row["citations"] for row in rows] == ["1", "2", "0", "1", "0", "0", "0"]
    assert rows[1]["thumbs_down"] == "1"
    assert rows[3]["mode"] == "generative"
    assert rows[5]["first_event_ms"] == ""  # not measured
    assert rows[6]["question"] == CAR_PARK


def test_a_private_conversations_question_is_not_exported(scenario, admin_client):
    response, rows = _export(admin_client, **{"from": "2026-03-02", "to": "2026-03-10"})

    private = [row for row in rows if row["visibility"] == "private"]
    assert len(private) == 1
    assert private[0]["question"] == ""
    assert private[0]["user"] == "ben"
    assert private[0]["outcome"] == "refused"
    assert SHARED_REFUSED in {row["question"] for row in rows}
    everything = "".join(",".join(row.values()) for row in rows)
    assert PRIVATE_QUESTION not in everything
    assert PRIVATE_QUESTION.lower() not in everything.lower()


def test_cells_a_spreadsheet_would_run_as_formulas_are_neutralised(scenario, admin_client):
    carl = scenario.users["carl"]
    conversation = carl.conversations.first()
    for question in ('=HYPERLINK("http://evil")', "+1+2", "-2+3", "@SUM(A1)", "\tTab"):
        exchange_at(conversation, when=at(TUESDAY, 20), question=question)
    carl.username = "=cmd|' /C calc'!A0"
    carl.save()

    response, rows = _export(admin_client, **{"from": "2026-03-03", "to": "2026-03-03"})

    questions = [row["question"] for row in rows if row["time"].startswith("2026-03-03T20")]
    assert sorted(questions) == sorted(
        ['\'=HYPERLINK("http://evil")', "'+1+2", "'-2+3", "'@SUM(A1)", "'\tTab"]
    )
    assert "'=cmd|' /C calc'!A0" in {row["user"] for row in rows}
    for row in rows:
        for value in row.values():
            assert not value.startswith(("=", "+", "-", "@", "\t", "\r")), value


def test_cell_neutralise():
    assert cell_neutralise(None) == ""
    assert cell_neutralise(12.345) == "12.3"
    assert cell_neutralise(3) == "3"
    assert cell_neutralise("=1+1") == "'=1+1"
    assert cell_neutralise("A question = fine") == "A question = fine"


def test_an_empty_period_exports_the_header_only(scenario, admin_client):
    _, rows = _export(admin_client, **{"from": "2026-01-01", "to": "2026-01-31"})

    assert rows == []


def test_the_last_30_days_by_default_and_the_last_7_when_asked(scenario, admin_client):
    from datetime import timedelta

    from django.utils import timezone

    conversation = scenario.users["carl"].conversations.first()
    now = timezone.now()
    for days_ago in (0, 10, 40):
        exchange_at(conversation, when=now - timedelta(days=days_ago), question=f"{days_ago} ago")

    _, rows = _export(admin_client)
    assert [row["question"] for row in rows] == ["10 ago", "0 ago"]
    _, rows = _export(admin_client, days="7")
    assert [row["question"] for row in rows] == ["0 ago"]
