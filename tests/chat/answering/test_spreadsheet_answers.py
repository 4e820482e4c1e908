"""Questions about cells: answered from the right row and cited down to the sheet and cell
range, over the SSE API of a real server and in process; an expired spreadsheet is no longer
cited, and answers given before it was purged keep their citation snapshot."""

from __future__ import annotations

import uuid
from datetime import timedelta
from io import StringIO

import httpx
import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from rest_framework.authtoken.models import Token

from chat.answering.extractive import cited_rows
from chat.presenters import quoted_rows_excerpt, sources_from_event
from knowledge.models import Document
from knowledge.retrieval import RetrievedChunk
from knowledge.sentences import row_spans
from knowledge.services import document_ingest
from tests.support.answers import assert_answer_is_grounded, collect
from tests.support.clients import sse_events
from tests.support.spreadsheets import (
    PRICE_QUESTION,
    PX_11_ROW,
    QX_2207_ROW,
    SAFETY_QUESTION,
    deck_pptx,
    inventory_xlsx,
    price_list_csv,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sheets_kb(tmp_path, policies_kb) -> dict[str, Document]:
    """The inventory workbook, the price list and a slide deck beside three policies."""
    documents = {}
    for key, path in {
        "inventory": inventory_xlsx(tmp_path / "inventory.xlsx"),
        "prices": price_list_csv(tmp_path / "price-list.csv"),
        "deck": deck_pptx(tmp_path / "warehouse-review.pptx"),
    }.items():
        outcome = document_ingest(path=path)
        assert outcome.action == "new", outcome.error
        documents[key] = outcome.document
    return documents


def answer_of(events) -> tuple[str, list[dict]]:
    types = [event.type for event in events]
    assert types[0] == "answer_start" and types[-2:] == ["sources", "answer_end"], types
    content = "".join(e.data["text"] for e in events if e.type == "answer_delta")
    return content, events[-2].data["citations"]


def test_safety_stock_question_over_the_sse_api_quotes_the_row_and_cites_its_cells(
    sheets_kb, staff_user, live_server_url
):
    token = Token.objects.create(user=staff_user).key
    body = {"message": SAFETY_QUESTION, "message_id": str(uuid.uuid4())}
    with (
        httpx.Client() as client,
        client.stream(
            "POST",
            f"{live_server_url}/api/chat",
            json=body,
            headers={"Authorization": f"Token {token}", "Accept": "text/event-stream"},
            timeout=60,
        ) as response,
    ):
        assert response.status_code == 200
        events = list(sse_events(response))

    types = [event for event, _ in events]
    assert types[0] == "answer_start" and types[-2:] == ["sources", "answer_end"], events
    content = "".join(data["text"] for event, data in events if event == "answer_delta")
    citations = events[-2][1]["citations"]
    assert_answer_is_grounded(content, citations)
    # The best row, verbatim with its marker: 200, not the neighbours' safety stocks.
    assert content.startswith(f"{QX_2207_ROW} [1]")
    assert "Safety stock: 200" in content and "QX-2208" not in content
    first = citations[0]
    assert (first["title"], first["sheet"], first["cells"]) == ("inventory.xlsx", "Stocks", "A4:E4")
    assert first["document_id"] == sheets_kb["inventory"].pk
    assert sources_from_event(citations)[0].heading == "inventory.xlsx — Stocks!A4:E4"


async def test_the_csv_price_is_answered_from_its_row(sheets_kb, staff_user):
    content, citations = answer_of(await collect(user=staff_user, question=PRICE_QUESTION))

    assert content.startswith(f"{PX_11_ROW} [1]")
    assert "2,40 €" in content
    assert (citations[0]["title"], citations[0]["sheet"], citations[0]["cells"]) == (
        "price-list.csv",
        "price-list",
        "A3:D3",
    )


async def test_a_slide_question_is_cited_with_its_slide_number(sheets_kb, staff_user):
    content, citations = answer_of(
        await collect(user=staff_user, question="What is the reorder lead time for brass valves?")
    )

    assert "nine working days" in content
    cited = citations[0]
    assert (cited["title"], cited["page"], cited["section"]) == (
        "Warehouse review 2026",
        2,
        "Stock targets",
    )
    assert cited["sheet"] is None and cited["cells"] is None


def test_cited_rows_narrow_the_range_to_the_quoted_rows():
    text = "S — a: 1\nS — a: 2\nS — a: 3"
    chunk = RetrievedChunk(
        chunk_id=1,
        document_id=1,
        document_title="t.xlsx",
        document_url="",
        chunk_index=0,
        page=None,
        section=None,
        text=text,
        excerpt=text,
        similarity=0.5,
        score=0.1,
        sheet="S",
        cells="B10:D12",
    )
    starts = [start for start, _ in row_spans(text)]
    assert cited_rows(chunk, [starts[1]]) == "B11:D11"
    assert cited_rows(chunk, [starts[0], starts[2]]) == "B10:D12"
    assert cited_rows(chunk.__class__(**{**chunk.as_dict(), "cells": "B10:D11"}), [0]) == "B10:D11"


def test_a_spreadsheet_source_is_excerpted_by_the_rows_the_answer_quotes():
    text = "S — a: 1 · b: x\nS — a: 2 · b: y\nS — a: 3 · b: z"
    assert quoted_rows_excerpt(text, "S — a: 2 · b: y [1]") == "S — a: 2 · b: y"
    assert quoted_rows_excerpt(text, "something else [1]").startswith("S — a: 1 · b: x S — a: 2")


def test_an_expired_spreadsheet_is_not_cited_and_purged_answers_keep_their_snapshot(
    sheets_kb, staff_user, django_user_model
):
    from asgiref.sync import async_to_sync

    ask = async_to_sync(collect)
    events = ask(user=staff_user, question=SAFETY_QUESTION)
    content, citations = answer_of(events)
    assert citations[0]["cells"] == "A4:E4"
    conversation_id = events[0].data["conversation_id"]

    inventory = sheets_kb["inventory"]
    Document.objects.filter(pk=inventory.pk).update(expires_at=timezone.now() - timedelta(hours=1))
    again = ask(user=staff_user, question=SAFETY_QUESTION)
    cited = [c["document_id"] for e in again if e.type == "sources" for c in e.data["citations"]]
    assert inventory.pk not in cited
    assert "QX-2207 · Product name" not in "".join(
        e.data.get("text", "") for e in again if e.type == "answer_delta"
    )

    out = StringIO()
    call_command("purge_expired", stdout=out)
    assert "Deleted 1 expired document(s)." in out.getvalue()
    assert not Document.objects.filter(pk=inventory.pk).exists()

    # Purged: its answers are withheld from the asker, and kept whole for superusers
    # (docs/decisions/0080-withheld-answers.md).
    client = Client()
    client.force_login(staff_user)
    messages = client.get(f"/api/conversations/{conversation_id}/messages").json()["messages"]
    assert messages[1]["withheld"] == "withdrawn" and QX_2207_ROW not in str(messages)
    client.force_login(
        django_user_model.objects.create_superuser(username="root", email="", password=None)
    )
    messages = client.get(f"/api/conversations/{conversation_id}/messages").json()["messages"]
    kept = messages[1]["citations"][0]
    assert messages[1]["content"] == content
    assert (kept["title"], kept["sheet"], kept["cells"]) == ("inventory.xlsx", "Stocks", "A4:E4")
    assert QX_2207_ROW in kept["text"] and kept["stale"] is True
    page = client.get(f"/c/{conversation_id}/").content.decode()
    assert "inventory.xlsx — Stocks!A4:E4" in page
    assert "This document is no longer in the knowledge base." in page
