"""The structured log lines besides the exchange's own (`docs/product.md §10`): the exchange
line's retrieval figures, one `chat.retrieval` line (chunk ids and scores, no text) and one
`chat.rate_limit` line per request turned away."""

from __future__ import annotations

import json
import logging

import pytest

from chat.models import Citation
from chat.ratelimit import chat_throttled, search_rate_limited
from tests.support.answers import collect

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
