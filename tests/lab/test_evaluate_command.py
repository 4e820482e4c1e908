"""`manage.py evaluate` on a tiny dataset: the protocol's figures, in a throwaway database that
is gone afterwards, and clear errors for unusable input."""

from __future__ import annotations

import json
import os
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import Document
from tests.support.datasets import databases


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
    assert answerable["flagged_rate"] == 0.0
    assert figures["off_kb"] == {
        "count": 1,
        "refusal_rate": 1.0,
        "flagged_rate": 0.0,
        "refused_or_flagged_rate": 1.0,
        "latency_ms": figures["off_kb"]["latency_ms"],
    }
    assert set(figures["latency_ms"]) >= {
        "first_event_p50",
        "first_event_p95",
        "total_p50",
        "total_p95",
    }
    assert "refuse_all_off_kb" in figures["calibration"]
    # The knowledge base's own measurement, beside the labels' optimum
    # (docs/decisions/0027-evidence-calibration-per-knowledge-base.md).
    automatic = figures["calibration"]["automatic"]
    assert 0.0 < automatic["threshold"] <= automatic["noise_floor"] < 1.0
    assert set(automatic) >= {"false_refusal_rate", "off_kb_refusal_rate", "probe_floor"}
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


FOLLOW_UPS = [
    {
        "id": "f1",
        "question": "Who designed the present Eddystone Lighthouse tower?",
        "kind": "answerable",
        "document": "Lighthouses",
        "answers": ["James Douglass"],
    },
    {
        "id": "f2",
        "question": "And when was it lit?",
        "kind": "answerable",
        "document": "Lighthouses",
        "answers": ["1882"],
        "follows": "f1",
    },
    {
        "id": "f3",
        "question": "Who first described the waggle dance of bees?",
        "kind": "answerable",
        "document": "Bees",
        "answers": ["Karl von Frisch"],
    },
]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_evaluate_asks_follow_ups_in_their_conversation_and_reports_them_apart(tmp_path):
    from tests.support.datasets import DOCUMENTS

    dataset = tmp_path / "follow-ups.json"
    dataset.write_text(
        json.dumps({"name": "follow", "documents": DOCUMENTS, "questions": FOLLOW_UPS})
    )
    json_path = tmp_path / "figures.json"
    out = StringIO()

    call_command("evaluate", str(dataset), "--json", str(json_path), stdout=out)

    figures = json.loads(json_path.read_text())
    followup = figures["followup"]
    # "And when was it lit?" means nothing alone: answered (1882, cited) only in context.
    assert followup["count"] == 1 and followup["answerable_count"] == 1
    assert followup["citation_accuracy"] == 1.0 and followup["false_refusal_rate"] == 0.0
    assert figures["answerable"]["count"] == 3
    assert "follow-ups" in out.getvalue()


@pytest.mark.django_db
def test_evaluate_rejects_a_follow_up_of_a_question_that_is_not_just_before_it(tmp_path):
    from tests.support.datasets import DOCUMENTS

    questions = [FOLLOW_UPS[0], FOLLOW_UPS[2], {**FOLLOW_UPS[1], "follows": "f1"}]
    dataset = tmp_path / "bad.json"
    dataset.write_text(json.dumps({"documents": DOCUMENTS, "questions": questions}))
    with pytest.raises(CommandError, match="follows must name the question just before it"):
        call_command("evaluate", str(dataset))


@pytest.mark.django_db
def test_evaluate_reads_documents_given_as_files_beside_the_dataset(tmp_path):
    from lab.evaluation.dataset import dataset_load

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "policy.html").write_text("<h1>Policy</h1><p>Leave is 25 days.</p>")
    dataset = tmp_path / "files.json"
    question = {"question": "How long is leave?", "kind": "answerable", "answers": ["25 days"]}
    dataset.write_text(
        json.dumps(
            {
                "documents": [{"id": "policy", "file": "docs/policy.html"}],
                "questions": [question],
            }
        )
    )

    loaded = dataset_load(dataset)

    assert loaded.documents[0].file_name == "policy.html"
    target = tmp_path / "out"
    target.mkdir()
    loaded.documents[0].write_to(target)
    assert (target / "policy.html").read_bytes() == (tmp_path / "docs/policy.html").read_bytes()
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps({"documents": [{"file": "nope.pdf"}], "questions": [question]}))
    with pytest.raises(CommandError, match="no such file"):
        call_command("evaluate", str(missing))


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_evaluate_in_generative_mode_asks_the_configured_model(tiny_dataset, tmp_path, settings):
    from chat.answering import breaker
    from tests.support.openai_server import openai_server, quoting_reply

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


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_evaluate_folds_leave_each_fold_out_and_count_its_questions_off_kb(tiny_dataset, tmp_path):
    out = StringIO()
    json_path = tmp_path / "folds.json"

    call_command(
        "evaluate", str(tiny_dataset), "--folds", "2", "--json", str(json_path), stdout=out
    )

    report = json.loads(json_path.read_text())
    first, second = report["folds"]
    assert first["left_out"] == ["Lighthouses"] and second["left_out"] == ["Bees"]
    for fold in (first, second):
        # One article in the knowledge base: its question answered and cited; the other
        # article's question is now off-KB, beside the real off-KB one, and both are refused.
        assert fold["answerable"]["count"] == 1
        assert fold["answerable"]["citation_accuracy"] == 1.0
        assert fold["off_kb"] == {**fold["off_kb"], "count": 2, "refusal_rate": 1.0}
        assert fold["held_out"] == {
            "count": 1,
            "refusal_rate": 1.0,
            "flagged_rate": 0.0,
            "refused_or_flagged_rate": 1.0,
        }
    assert report["mean"]["answerable.citation_accuracy"] == 1.0
    assert report["worst"]["held_out.refusal_rate"] == 1.0
    table = out.getvalue()
    assert "left-out articles refused" in table and "worst" in table
    assert not Document.objects.exists()
    assert f"sourced_eval_{os.getpid()}" not in databases()


@pytest.mark.django_db
def test_evaluate_folds_refuses_an_impossible_split(tiny_dataset):
    with pytest.raises(CommandError, match="2 or more"):
        call_command("evaluate", str(tiny_dataset), "--folds", "1")
    with pytest.raises(CommandError, match="at least 3 documents"):
        call_command("evaluate", str(tiny_dataset), "--folds", "3")


def test_folds_summary_takes_the_worst_fold_per_figure():
    from lab.evaluation.runner import folds_summary

    folds = [
        {"answerable": {"citation_accuracy": 0.9, "false_refusal_rate": 0.02}},
        {"answerable": {"citation_accuracy": 0.8, "false_refusal_rate": 0.05}},
    ]
    summary = folds_summary(folds)
    assert summary["mean"]["answerable.citation_accuracy"] == 0.85
    assert summary["worst"]["answerable.citation_accuracy"] == 0.8
    assert summary["worst"]["answerable.false_refusal_rate"] == 0.05
