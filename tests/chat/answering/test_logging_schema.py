"""The structured log lines besides the exchange's own (`docs/product.md §10`): the exchange
line's retrieval figures (with each side's time), one `chat.retrieval` line (chunk ids and
scores, no text), one `chat.rate_limit` line per request turned away and one `chat.summary`
line per conversation summary written (no text)."""

from __future__ import annotations

import json
import logging

import pytest
from asgiref.sync import sync_to_async

from chat.answering import breaker
from chat.models import ChatSettings, Citation, Message
from chat.ratelimit import chat_throttled, search_rate_limited
from tests.support.answers import collect
from tests.support.openai_server import Scripted, openai_server

LEAVE_QUESTION = "How many days of annual leave do full-time employees get?"


def _lines(caplog, name: str) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == name]


@pytest.mark.django_db(transaction=True)
async def test_the_exchange_line_has_the_retrieval_figures_and_a_retrieval_line_its_chunks(
    policies_kb, staff_user, caplog
):
    caplog.set_level(logging.INFO)
    events = await collect(user=staff_user, question=LEAVE_QUESTION)
    (exchange,) = _lines(caplog, "sourced.exchange")
    (retrieval,) = _lines(caplog, "sourced.retrieval")
    assert retrieval["event"] == "chat.retrieval"
    assert retrieval["message"] == exchange["message"] == events[0].data["message_id"]
    assert exchange["candidates"] == len(retrieval["chunk_ids"]) >= 1
    similarities = retrieval["similarities"]
    assert exchange["min_distance"] == pytest.approx(1 - max(similarities), abs=1e-3)
    assert exchange["max_distance"] == pytest.approx(1 - min(similarities), abs=1e-3)
    assert exchange["best_similarity"] == pytest.approx(max(similarities), abs=1e-3)
    assert retrieval["scores"] == sorted(retrieval["scores"], reverse=True)
    cited = [
        c
        async for c in Citation.objects.filter(message_id=exchange["message"]).values_list(
            "chunk_id", flat=True
        )
    ]
    assert cited and set(cited) <= set(retrieval["chunk_ids"])
    # an extractive answer has no prompt
    assert (exchange["prompt_chars"], exchange["tokens_out"]) == (None, None)
    assert set(retrieval) == {"event", "message", "chunk_ids", "scores", "similarities"}
    # each side of the hybrid search timed (ms), within the retrieval's whole time
    assert exchange["vector_ms"] > 0 and exchange["lexical_ms"] > 0
    assert exchange["vector_ms"] + exchange["lexical_ms"] <= exchange["retrieval_ms"]


@pytest.mark.django_db(transaction=True)
async def test_a_summary_written_is_one_summary_line_without_its_text(
    policies_kb, staff_user, settings, caplog
):
    caplog.set_level(logging.INFO)
    summary = "The user asked about annual leave: full-time staff get 25 days."
    await sync_to_async(breaker.circuit_reset)()  # the breaker lives in the shared cache
    with openai_server() as server:
        settings.LLM_BACKEND, settings.LLM_BASE_URL = "openai", server.base_url
        settings.LLM_MODEL, settings.LLM_API_KEY, settings.LLM_TIMEOUT_S = "m", "k", 5
        await ChatSettings.objects.aupdate_or_create(
            pk=1,
            defaults={"generation_mode": ChatSettings.Mode.GENERATIVE, "max_history_turns": 2},
        )
        server.script(
            Scripted(pieces=["Full-time employees receive 25 days [1]."]),
            Scripted(pieces=["Five days carry over [1]."]),
            Scripted(pieces=["The meal allowance is 45 euros [1]."]),
            Scripted(pieces=[summary]),  # the fourth question first folds the first turn
            Scripted(pieces=["Passwords need 14 characters [1]."]),
        )
        conversation_id = None
        for question in (
            LEAVE_QUESTION,
            "How many days of leave can I carry over?",
            "What is the daily meal allowance while travelling?",
            "How long must passwords be?",
        ):
            events = await collect(
                user=staff_user, question=question, conversation_id=conversation_id
            )
            conversation_id = events[0].data["conversation_id"]

    stored = await Message.objects.aget(
        conversation_id=conversation_id, role=Message.Role.SYSTEM_SUMMARY
    )
    assert _lines(caplog, "sourced.summary") == [
        {
            "event": "chat.summary",
            "message": str(stored.pk),
            "covers": str(stored.reply_to_id),
            "turns_folded": 1,
            "chars": len(summary),
        }
    ]
    assert not any(
        "25 days" in r.getMessage() for r in caplog.records if r.name == "sourced.summary"
    )


@pytest.mark.django_db
def test_a_request_turned_away_is_one_rate_limit_line(staff_user, settings, caplog, pinned_window):
    settings.CHAT_RATE_LIMIT = "2/m"
    settings.CHAT_FLOOD_MIN_INTERVAL = 0
    caplog.set_level(logging.INFO, logger="sourced.ratelimit")
    assert chat_throttled(staff_user) is None and chat_throttled(staff_user) is None
    assert _lines(caplog, "sourced.ratelimit") == []
    throttled = chat_throttled(staff_user)
    assert search_rate_limited(staff_user) is None
    search_rate_limited(staff_user)
    turned_away = search_rate_limited(staff_user)
    lines = _lines(caplog, "sourced.ratelimit")
    assert lines == [
        {
            "event": "chat.rate_limit",
            "group": "chat",
            "user": staff_user.pk,
            "reason": "rate",
            "retry_after": throttled.retry_after,
        },
        {
            "event": "chat.rate_limit",
            "group": "search",
            "user": staff_user.pk,
            "reason": "rate",
            "retry_after": turned_away,
        },
    ]
