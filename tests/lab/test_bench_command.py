"""`manage.py bench` on a tiny dataset: every figure is reported (timings are printed, never
asserted), the answers over the real server succeed, and nothing is left behind."""

from __future__ import annotations

import json
import os
import socket
from io import StringIO
from urllib.parse import urlsplit

import pytest
from django.core.management import CommandError, call_command

from tests.support.datasets import QUESTIONS, databases


def _accepts_connections(address: str) -> bool:
    parts = urlsplit(address)
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((parts.hostname, parts.port)) == 0


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_bench_reports_every_figure_on_a_tiny_dataset_and_leaves_nothing_behind(
    tiny_dataset, tmp_path
):
    out, err = StringIO(), StringIO()
    json_path = tmp_path / "bench.json"

    call_command(
        "bench",
        "--dataset",
        str(tiny_dataset),
        "--chunks",
        "200",
        "--concurrency",
        "1,2",
        "--questions",
        "3",
        "--web-processes",
        "2",
        "--compare-processes",
        "1,2",
        "--compare-rounds",
        "1",
        "--json",
        str(json_path),
        stdout=out,
        stderr=err,
    )

    figures = json.loads(json_path.read_text())
    print(out.getvalue())  # the timings, for whoever runs the test (never asserted)

    # What the database server keeps in memory, as it reports it (decision 0154).
    assert figures["shared_buffers"].endswith(("MB", "GB"))
    assert f"PostgreSQL's shared buffers {figures['shared_buffers']}." in out.getvalue()

    ingest = figures["ingest"]
    assert ingest["documents"] == 2
    assert ingest["chunks"] >= 2
    assert {"chunks_per_s", "raw_embed_chunks_per_s", "ratio"} <= set(ingest)

    # The corpus was grown to the requested size with synthetic chunks, and searched.
    size = figures["corpus"]["sizes"]["200"]
    assert size["chunks"] == 200
    assert size["synthetic_chunks"] == 200 - ingest["chunks"]
    retrieval = figures["retrieval_ms"]["200"]
    assert set(retrieval) >= {"p50", "p95", "p50_with_embedding", "p95_with_embedding"}
    assert retrieval["questions"] == 3

    # Every question over both transports got an answer or a refusal from the real server:
    # one client asks all 3 questions; two clients ask 2 each.
    database_cpu_ms = 0.0
    for transport in ("ws", "sse"):
        for concurrency, asked in (("1", 3), ("2", 4)):
            counts = figures["exchanges"][transport][concurrency]
            assert counts["questions"] == asked, (transport, concurrency, counts)
            assert counts["errors"] == 0, (transport, concurrency, counts)
            assert counts["answers"] + counts["refusals"] == asked
            # Answering costs CPU in the server and in the (local, embedded) PostgreSQL. The
            # processes' CPU is counted in the kernel's ticks (10 ms): a phase of 3-4 questions
            # may leave PostgreSQL's below one tick, so it is positive over the whole run.
            cpu = counts["cpu_ms_per_question"]
            assert cpu["server"] > 0 and cpu["database"] >= 0, (transport, concurrency, cpu)
            database_cpu_ms += cpu["database"]
            assert set(figures["first_event_ms"][transport][concurrency]) == {"p50", "p95"}
            assert set(figures["total_ms"][transport][concurrency]) == {"p50", "p95"}
    assert database_cpu_ms > 0
    assert figures["errors"] == 0

    load = figures["conversation_load_ms"]
    assert load["messages"] == 200
    assert load["citations"] >= 100  # every answer cites at least one source
    assert {"p50", "p95"} <= set(load["api"]) and {"p50", "p95"} <= set(load["page"])
    assert figures["conversation_api_load_ms"] == {k: load["api"][k] for k in ("p50", "p95")}
    assert figures["conversation_page_load_ms"] == {k: load["page"][k] for k in ("p50", "p95")}
    assert figures["server_peak_rss_mb"] > 0
    assert figures["server"]["processes"] == 2
    assert figures["server"]["answer_slots"] == 6  # the default CHAT_ANSWER_SLOTS
    assert "(6 answers at once per process, CHAT_ANSWER_SLOTS)" in out.getvalue()
    assert len(figures["server_peak_rss_mb_each"]) == 2  # the two daphne processes

    # The answers were measured again against a 1-process and a 2-process server.
    comparison = figures["process_comparison"]
    assert set(comparison) == {"1", "2"}
    for processes, rounds in comparison.items():
        assert len(rounds) == 1
        entry = rounds[0]
        assert entry["errors"] == 0, processes
        assert set(entry["first_event_ms"]) == {"ws", "sse"}
        assert set(entry["first_event_ms"]["ws"]) == {"1", "2"}
        assert entry["peak_rss_mb"] > 0
    assert "Web processes compared" in out.getvalue()

    report = out.getvalue()
    assert "SYNTHETIC" in report
    assert "GET /api/conversations/<id>/messages" in report
    assert "conversation page" in report

    # The server is stopped and the throwaway database dropped.
    assert not _accepts_connections(figures["server"]["address"])
    assert f"sourced_bench_{os.getpid()}" not in databases()


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--chunks", "0"], "--chunks: 0 is out of range"),
        (["--chunks", "10000,abc"], "'abc' is not a positive whole number"),
        (["--chunks", "-5"], "is not a positive whole number"),
        (["--concurrency", "0"], "--concurrency: 0 is out of range (1..100)"),
        (["--concurrency", "1,101"], "--concurrency: 101 is out of range (1..100)"),
        (["--questions", "0"], "--questions must be between 1"),
        (["--web-processes", "0"], "--web-processes must be between 1"),
        (["--compare-processes", "1,0"], "--compare-processes: 0 is out of range"),
        (["--compare-rounds", "0"], "--compare-rounds must be between 1"),
        (["--dataset", "/nonexistent/eval.json"], "Cannot read /nonexistent/eval.json"),
        (["--json", "/nonexistent/folder/out.json"], "no such folder"),
        (["--while-reading", "21"], "--while-reading must be between 0 and 20"),
        (["--while-reading", "2", "--retrieval-only"], "not with --retrieval-only"),
    ],
)
def test_bench_refuses_bad_options_with_a_clear_error(arguments, message):
    with pytest.raises(CommandError) as error:
        call_command("bench", *arguments)
    assert message in str(error.value)


def test_questions_are_spread_over_the_dataset_and_shared_by_the_clients(tiny_dataset):
    from lab.benchmark.run import questions_per_client, questions_sample
    from lab.evaluation.dataset import dataset_load

    dataset = dataset_load(tiny_dataset)
    assert questions_sample(dataset, 2) == [QUESTIONS[0]["question"], QUESTIONS[1]["question"]]
    # More than the file holds: the file is repeated.
    assert questions_sample(dataset, 4)[3] == QUESTIONS[0]["question"]

    sample = ["a", "b", "c", "d", "e"]
    assert questions_per_client(sample, 1) == [sample]
    assert questions_per_client(sample, 2) == [["a", "b", "c"], ["d", "e", "a"]]
    # More clients than questions: each still asks one.
    assert questions_per_client(["a", "b"], 3) == [["a"], ["b"], ["a"]]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_bench_retrieval_only_measures_the_collections_case_without_a_server(
    tiny_dataset, tmp_path
):
    json_path = tmp_path / "bench.json"
    out = StringIO()

    call_command(
        "bench",
        "--dataset",
        str(tiny_dataset),
        "--chunks",
        "200",
        "--questions",
        "3",
        "--retrieval-only",
        "--json",
        str(json_path),
        stdout=out,
        stderr=StringIO(),
    )

    figures = json.loads(json_path.read_text())
    assert "first_event_ms" not in figures and "server" not in figures
    case = figures["collections"]
    assert (case["collections"], case["readable"], case["questions"]) == (20, 3, 3)
    assert 0 < case["reader_chunks"] < figures["retrieval_ms"]["200"]["chunks"]
    assert case["p95_restricted"] > 0 and case["p95_unrestricted"] > 0
    assert case["p95_restricted_first"] > 0
    assert case["p95_ratio_first"] == round(
        case["p95_restricted_first"] / case["p95_unrestricted"], 3
    )
    # Both real documents lie in the reader's collections: their questions are the reader's,
    # and the filter inside the ranking queries never costs them their answer.
    assert case["own_questions"] >= 1
    assert case["recall_at_5_restricted"] >= case["recall_at_5_unrestricted"]
    assert "Collections: the corpus in 20 collections" in out.getvalue()
    assert f"sourced_bench_{os.getpid()}" not in databases()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_bench_while_reading_measures_answers_without_and_with_files_being_read(
    tiny_dataset, tmp_path
):
    """docs/decisions/0084-reading-files-does-not-starve-answering.md: the first answer event
    without and with personal files read by a real worker process, both p95s and the ratio."""
    json_path = tmp_path / "bench.json"
    out = StringIO()

    call_command(
        "bench",
        "--dataset",
        str(tiny_dataset),
        "--chunks",
        "200",
        "--concurrency",
        "1",
        "--questions",
        "2",
        "--while-reading",
        "1",
        "--json",
        str(json_path),
        stdout=out,
        stderr=StringIO(),
    )

    figures = json.loads(json_path.read_text())
    print(out.getvalue())
    reading = figures["while_reading"]
    assert (reading["files"], reading["pages"], reading["rounds"]) == (1, 20, 2)
    per = reading["first_event_ms"]["1"]
    # Two rounds of each condition, 2 questions each, all answered or refused.
    assert per["idle"]["answers"] == 4 and per["reading"]["answers"] == 4
    assert per["idle"]["p95"] > 0 and per["reading"]["p95"] > 0
    assert per["p95_ratio"] == round(per["reading"]["p95"] / per["idle"]["p95"], 2)
    assert reading["errors"] == 0
    assert len(reading["unread_at_end"]) == 2
    assert reading["worker_nice"] == 10
    assert "Answers while files are read" in out.getvalue()
    assert f"sourced_bench_{os.getpid()}" not in databases()
