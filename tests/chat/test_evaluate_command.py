"""`manage.py evaluate` on a tiny dataset: the protocol's figures, in a throwaway database that
is gone afterwards, and clear errors for unusable input."""

from __future__ import annotations

import json
import os
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import Document
from tests.chat.conftest import databases


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_evaluate_scores_a_tiny_dataset_in_a_throwaway_database(tiny_dataset, tmp_path):
    out = StringIO()
    json_path = tmp_path / "figures.json"

    call_command("evaluate", str(tiny_dataset), "--json", str(json_path), "--calibrate", stdout=out)

    figures = json.loads(json_path.read_text())
    assert figures["dataset"] == "tiny"
    assert figures["questions"] == 3
    answerable = figures["answerable"]
    assert answerable["count"] == 2
    # Both facts sit verbatim in one paragraph each: cited, retrieved first, not refused.
    assert answerable["citation_accuracy"] == 1.0
    assert answerable["recall_at_1"] == 1.0
    assert answerable["false_refusal_rate"] == 0.0
    assert figures["off_kb"] == {
        "count": 1,
        "refusal_rate": 1.0,
        "latency_ms": figures["off_kb"]["latency_ms"],
    }
    assert set(figures["latency_ms"]) >= {
        "first_event_p50",
        "first_event_p95",
        "total_p50",
        "total_p95",
    }
    assert "refuse_all_off_kb" in figures["calibration"]
    table = out.getvalue()
    assert "citation accuracy" in table and "100.0%" in table
    # The user's knowledge base was never touched, and the throwaway database is gone.
    assert not Document.objects.exists()
    assert f"sourced_eval_{os.getpid()}" not in databases()


@pytest.mark.django_db
def test_evaluate_refuses_an_unusable_dataset_with_a_clear_message(tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text('{"documents": []}')
    with pytest.raises(CommandError, match="questions"):
        call_command("evaluate", str(broken))
    with pytest.raises(CommandError, match="Cannot read"):
        call_command("evaluate", str(tmp_path / "missing.json"))
    not_json = tmp_path / "not.json"
    not_json.write_text("nope")
    with pytest.raises(CommandError, match="not valid JSON"):
        call_command("evaluate", str(not_json))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_evaluate_in_generative_mode_asks_the_configured_model(tiny_dataset, tmp_path, settings):
    from chat.answering import breaker
    from tests.chat.openai_server import openai_server, quoting_reply

    breaker.circuit_reset()
    json_path = tmp_path / "figures.json"
    with openai_server() as server:
        server.default = quoting_reply
        settings.LLM_BACKEND, settings.LLM_BASE_URL = "openai", server.base_url
        settings.LLM_MODEL = "test-model"
        out = StringIO()
        call_command(
            "evaluate", str(tiny_dataset), "--mode", "generative", "--json", str(json_path),
            stdout=out,
        )  # fmt: skip
    figures = json.loads(json_path.read_text())
    assert figures["mode"] == "generative" and "generative mode" in out.getvalue()
    # The two answerable questions reached the model; the off-topic one was refused first.
    assert len(server.completions()) == 2
    assert figures["answerable"]["citation_accuracy"] == 1.0
    assert figures["off_kb"]["refusal_rate"] == 1.0
