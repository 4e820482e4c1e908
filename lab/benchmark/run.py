"""The whole benchmark, in order, inside a throwaway database (dropped at the end, also on
Ctrl-C or SIGTERM):

1. ingestion of the dataset's documents vs. the embedding model alone on the same texts;
2. for each corpus size: grow the corpus (synthetic copies), time retrieval;
3. at the largest size, against a running daphne: answers over the WebSocket and over SSE
   at each concurrency, then the load of a 200-message conversation, then the server's peak
   memory (left out with `retrieval_only`);
4. at the largest size, the collections case: the corpus spread over 20 collections, hybrid
   retrieval for a reader of 3 of them vs. unrestricted, and that reader's recall@5
   (lab/benchmark/collections.py). Last, since it moves every document out of General.

How answers are timed and the CPU per question counted:
docs/decisions/0058-bench-first-event-latency-and-cpu-per-question.md.
"""

from __future__ import annotations

import asyncio
import io
import math
import os
import resource
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, redirect_stdout
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from tqdm import tqdm

from lab.benchmark import clients as bench_clients
from lab.benchmark.collections import collections_measure
from lab.benchmark.conversation import PAIRS, LongConversation, conversation_build
from lab.benchmark.corpus import (
    NOISE_SIGMA,
    RETRIEVAL_TOP_K,
    SyntheticCorpus,
    index_build_memory_mb,
    ingest_measure,
    question_vectors,
    retrieval_measure,
)
from lab.benchmark.reading import files_being_read
from lab.benchmark.server import (
    RunningServer,
    database_server_pid,
    database_sessions_end,
    process_tree_cpu_seconds,
    server_running,
)
from lab.benchmark.stages import log_offset, stage_cpu_per_question
from lab.benchmark.stats import latency_summary, load_average
from lab.evaluation.dataset import Dataset
from lab.evaluation.isolated import database_url, isolated_database

TRANSPORTS = ("ws", "sse")
# --while-reading: rounds of (idle, reading) measurements and pages of each file read.
READING_ROUNDS = 2
READING_PAGES = 20
# The rate limit is raised in the server's environment so that it never refuses a benchmark
# question; the check itself still runs on every request.
SERVER_RATE_LIMIT = "1000000/m"
CONVERSATION_LOADS_MIN, CONVERSATION_LOADS_MAX = 5, 30
DATABASE_PREFIX = "sourced_bench"

Say = Callable[[str], None]


@dataclass(frozen=True)
class BenchOptions:
    sizes: list[int]  # corpus sizes in chunks, ascending
    concurrency: list[int]  # simultaneous clients, ascending
    questions: int  # questions per measurement (see questions_sample / questions_per_client)
    web_processes: int = 1  # daphne processes of the server (config.web)
    # Also measure the answers with each of these process counts, in turns (--compare-processes)
    compare_processes: tuple[int, ...] = ()
    compare_rounds: int = 2
    retrieval_only: bool = False  # ingestion, retrieval and the collections case; no server
    # Also measure the first answer event without and with this many files being read by a
    # worker process (--while-reading; 0: not measured)
    while_reading: int = 0


# Asked once per transport before measuring: not one of the measured questions.
WARM_UP_QUESTION = "What do these documents cover?"


def questions_sample(dataset: Dataset, count: int) -> list[str]:
    """`count` of the dataset's questions spread evenly over the file (all kinds in their
    proportions), repeating the file when it holds fewer."""
    pool = [q.question for q in dataset.questions]
    if count <= len(pool):
        return [pool[(i * len(pool)) // count] for i in range(count)]
    return [pool[i % len(pool)] for i in range(count)]


def questions_per_client(sample: Sequence[str], concurrency: int) -> list[list[str]]:
    """The sample shared by `concurrency` clients: each asks ⌈N / c⌉ questions (at least one),
    consecutive in the sample, so together they ask about N."""
    each = max(1, math.ceil(len(sample) / concurrency))
    return [
        [sample[(client * each + j) % len(sample)] for j in range(each)]
        for client in range(concurrency)
    ]


def _bar(total: int, desc: str, unit: str) -> tqdm:
    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the run like Ctrl-C does, so the server and the database are cleaned up."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def bench_run(dataset: Dataset, options: BenchOptions, *, say: Say) -> dict[str, Any]:
    """Run every measurement; the figures (times in ms), as `manage.py bench --json` writes."""
    with _sigterm_as_interrupt(), ExitStack() as stack:
        with redirect_stdout(io.StringIO()):  # creating it prints a line about the cache table
            stack.enter_context(isolated_database(DATABASE_PREFIX))
        figures: dict[str, Any] = {
            "dataset": dataset.name,
            "cpus": os.cpu_count(),
            "questions": options.questions,
            "load_average": {"start": load_average()},
            "shared_buffers": _shared_buffers(),
        }
        say(f"Ingesting {len(dataset.documents)} documents of {dataset.name}…")
        figures["ingest"] = _ingest_step(dataset)

        sample = questions_sample(dataset, options.questions)
        vectors = question_vectors(sample)
        corpus = SyntheticCorpus()
        figures["corpus"], figures["retrieval_ms"] = _retrieval_steps(
            corpus, options.sizes, sample, vectors
        )
        if options.retrieval_only:
            figures["collections"] = _collections_step(dataset, sample, vectors)
            figures["load_average"]["end"] = load_average()
            return figures

        clients = bench_clients.clients_create(max(options.concurrency) + 1)
        owner = get_user_model().objects.get(username=clients[0].username)
        with _bar(PAIRS, "200-message conversation", "pair") as bar:
            conversation = conversation_build(
                user=owner, questions=sample, vectors=vectors, progress=bar.update
            )
        # Every measured run (transport × concurrency) asks questions of its own: the server
        # keeps what it computed for a question (sentence vectors), so a run repeating the
        # questions of the one before would be measured with warm caches.
        runs = len(TRANSPORTS) * len(options.concurrency)
        pool = questions_sample(dataset, options.questions * runs)
        figures.update(
            _server_step(
                corpus_size=corpus.size,
                clients=clients,
                samples=[pool[run::runs] for run in range(runs)],
                options=options,
                conversation=conversation,
                say=say,
            )
        )
        if options.while_reading:
            reading_runs = READING_ROUNDS * 2 * len(options.concurrency)
            reading_pool = questions_sample(dataset, options.questions * reading_runs)
            figures["while_reading"] = _reading_step(
                clients=clients,
                samples=[reading_pool[run::reading_runs] for run in range(reading_runs)],
                options=options,
                say=say,
            )
        if options.compare_processes:
            figures["process_comparison"] = _processes_compare(
                clients=clients, samples=[pool[run::runs] for run in range(runs)], options=options
            )
        figures["collections"] = _collections_step(dataset, sample, vectors)
        figures["load_average"]["end"] = load_average()
    return figures


def _collections_step(dataset: Dataset, sample: list[str], vectors: np.ndarray) -> dict[str, Any]:
    """The collections case at the corpus's current (largest) size, with the load average
    around it."""
    started_load = load_average()
    with _bar(len(sample), "collections: restricted vs unrestricted", "q") as bar:
        figures = collections_measure(dataset, sample, vectors, progress=bar.update)
    return {**figures, "load_average_start": started_load, "load_average_end": load_average()}


def _processes_compare(
    *, clients: list[bench_clients.Client], samples: list[list[str]], options: BenchOptions
) -> dict[str, Any]:
    """The answers measured again against servers of each process count, in turns (1, 2, 1, 2
    ...) so that the machine's changing load falls on each alike: {count: [figures per
    round]}."""
    results: dict[str, list[dict[str, Any]]] = {str(n): [] for n in options.compare_processes}
    try:
        for _ in range(options.compare_rounds):
            for processes in options.compare_processes:
                started_load = load_average()
                with server_running(
                    database_url=database_url(),
                    env={"CHAT_RATE_LIMIT": SERVER_RATE_LIMIT, "CHAT_FLOOD_MIN_INTERVAL": "0"},
                    processes=processes,
                ) as server:
                    first, total, counts = asyncio.run(
                        _answers_measure(
                            server,
                            clients=clients,
                            samples=samples,
                            options=options,
                            processes=processes,
                        )
                    )
                    server.check_alive()
                    results[str(processes)].append(
                        {
                            "load_average_start": started_load,
                            "first_event_ms": first,
                            "total_ms": total,
                            "errors": _errors(counts),
                            "peak_rss_mb": server.peak_rss_mb(),
                        }
                    )
    finally:
        database_sessions_end()
    return results


def _reading_step(
    *,
    clients: list[bench_clients.Client],
    samples: list[list[str]],
    options: BenchOptions,
    say: Say,
) -> dict[str, Any]:
    """The first answer event over the WebSocket at each concurrency, with no file being read
    ("idle") and with `options.while_reading` files being read by a worker process
    ("reading"), in READING_ROUNDS rounds of both (idle first, then reading first, and so on,
    so that the machine's changing load falls on each alike); each condition's p50/p95 over
    its rounds, and reading p95 / idle p95. `samples`: questions for each measured run."""
    started_load = load_average()
    runs = iter(samples)
    times: dict[str, dict[str, list[float]]] = {
        str(c): {"idle": [], "reading": []} for c in options.concurrency
    }
    unread_at_end: list[int] = []
    errors = 0

    def measure(server: RunningServer, condition: str) -> None:
        nonlocal errors
        for concurrency in options.concurrency:
            assigned = questions_per_client(next(runs), concurrency)
            asked = sum(len(own) for own in assigned)
            with _bar(asked, f"ws × {concurrency} clients, {condition}", "q") as bar:
                exchanges = asyncio.run(
                    bench_clients.load_run(
                        server,
                        transport="ws",
                        clients=clients[1 : concurrency + 1],
                        questions=assigned,
                        done=lambda bar=bar: bar.update(1),
                    )
                )
            server.check_alive()
            errors += sum(e.outcome == "error" for e in exchanges)
            times[str(concurrency)][condition] += [
                e.first_ms for e in exchanges if e.outcome != "error" and e.first_ms is not None
            ]

    try:
        with server_running(
            database_url=database_url(),
            env={"CHAT_RATE_LIMIT": SERVER_RATE_LIMIT, "CHAT_FLOOD_MIN_INTERVAL": "0"},
            processes=options.web_processes,
        ) as server:
            for _ in range(2 * options.web_processes):
                asyncio.run(
                    bench_clients.load_run(
                        server, transport="ws", clients=clients[:1], questions=[[WARM_UP_QUESTION]]
                    )
                )
            for round_ in range(READING_ROUNDS):
                for condition in ("idle", "reading") if round_ % 2 == 0 else ("reading", "idle"):
                    if condition == "idle":
                        measure(server, condition)
                        continue
                    say(f"Queuing {options.while_reading} files of {READING_PAGES} pages…")
                    with files_being_read(
                        database_url=database_url(),
                        files=options.while_reading,
                        pages=READING_PAGES,
                    ) as reading:
                        measure(server, condition)
                        unread_at_end.append(reading.unread())
    finally:
        database_sessions_end()
    by_concurrency: dict[str, Any] = {}
    for concurrency, conditions in times.items():
        idle, loaded = latency_summary(conditions["idle"]), latency_summary(conditions["reading"])
        by_concurrency[concurrency] = {
            "idle": {"p50": idle["p50"], "p95": idle["p95"], "answers": len(conditions["idle"])},
            "reading": {
                "p50": loaded["p50"],
                "p95": loaded["p95"],
                "answers": len(conditions["reading"]),
            },
            "p95_ratio": round(loaded["p95"] / idle["p95"], 2) if idle["p95"] else None,
        }
    return {
        "files": options.while_reading,
        "pages": READING_PAGES,
        "rounds": READING_ROUNDS,
        "worker_nice": settings.INGEST_WORKER_NICE,
        "first_event_ms": by_concurrency,
        # Files still unread when each reading run ended: 0 means the reading did not last
        # the whole run (more files are needed).
        "unread_at_end": unread_at_end,
        "errors": errors,
        "load_average_start": started_load,
        "load_average_end": load_average(),
    }


def _errors(counts: dict[str, dict[str, Any]]) -> int:
    """The failed exchanges over every transport and concurrency of `counts`."""
    return sum(c["errors"] for per in counts.values() for c in per.values())


def _cpu_seconds(server: RunningServer, database_pid: int | None) -> dict[str, float | None]:
    """CPU seconds used so far by the server's processes and by the PostgreSQL server (all
    its processes, when it runs on this machine)."""
    return {
        "server": server.cpu_seconds(),
        "database": None if database_pid is None else process_tree_cpu_seconds(database_pid),
    }


def _cpu_ms_per_question(
    before: dict[str, float | None], after: dict[str, float | None], questions: int
) -> dict[str, float | None]:
    """CPU milliseconds per question, by whom (load-independent, unlike the latencies: what
    the other processes of the machine take does not count)."""
    per: dict[str, float | None] = {}
    for name, start in before.items():
        end = after.get(name)
        per[name] = (
            None
            if start is None or end is None or not questions
            else round((end - start) * 1000 / questions, 1)
        )
    return per


def _shared_buffers() -> str:
    """PostgreSQL's shared buffers as it reports them ("1GB"): what the database server keeps
    in its own memory decides how much of a large corpus a question reads from the kernel
    (docs/decisions/0154-the-embedded-database-s-memory.md)."""
    with connection.cursor() as cursor:
        cursor.execute("SHOW shared_buffers")
        return cursor.fetchone()[0]


def _database_mb() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        return round(cursor.fetchone()[0] / 1e6)


def _ingest_step(dataset: Dataset) -> dict[str, Any]:
    ingest = ingest_measure(dataset)
    return {
        "documents": ingest.documents,
        "chunks": ingest.chunks,
        "seconds": round(ingest.seconds, 2),
        "chunks_per_s": round(ingest.chunks_per_s, 1),
        "raw_embed_seconds": round(ingest.raw_seconds, 2),
        "raw_embed_chunks_per_s": round(ingest.raw_chunks_per_s, 1),
        "ratio": round(ingest.ratio, 3),
        "sentences": ingest.sentences,
        "raw_embed_all_seconds": round(ingest.raw_all_seconds, 2),
        "ratio_all": round(ingest.ratio_all, 3),
    }


def _retrieval_steps(
    corpus: SyntheticCorpus, sizes: Sequence[int], sample: list[str], vectors: np.ndarray
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Grow the corpus to each size in turn and time retrieval there: (corpus, retrieval)."""
    described: dict[str, Any] = {
        "real_chunks": corpus.real,
        "synthetic": (
            f"real chunk texts with a number token appended; real embeddings + Gaussian "
            f"noise sigma={NOISE_SIGMA}, renormalised; bulk-loaded with COPY, HNSW and GIN "
            f"indexes dropped during the load and rebuilt after"
        ),
        "sizes": {},
    }
    retrieval: dict[str, Any] = {}
    for size in sizes:
        with _bar(max(0, size - corpus.size), f"corpus → {size:,} chunks", "chunk") as bar:
            grown = corpus.grow_to(size, progress=bar.update)
        described["sizes"][str(size)] = {
            "chunks": grown.chunks,
            "synthetic_chunks": grown.synthetic,
            "added": grown.added,
            "load_s": round(grown.load_seconds, 1),
            "index_rebuild_s": round(grown.index_seconds, 1),
            "index_build_memory_mb": index_build_memory_mb(grown.chunks),
            # Peak resident memory of this (the benchmark's) process so far, and the size of
            # the throwaway database, once grown.
            "bench_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "database_mb": _database_mb(),
        }
        with _bar(len(sample), f"retrieval at {grown.chunks:,} chunks", "q") as bar:
            timings = retrieval_measure(sample, vectors, progress=bar.update)
        summaries = {name: latency_summary(values) for name, values in timings.items()}
        retrieval[str(size)] = {
            "p50": summaries["hybrid"]["p50"],
            "p95": summaries["hybrid"]["p95"],
            "p50_with_embedding": summaries["hybrid_with_embedding"]["p50"],
            "p95_with_embedding": summaries["hybrid_with_embedding"]["p95"],
            "p50_vector_only": summaries["vector_only"]["p50"],
            "p95_vector_only": summaries["vector_only"]["p95"],
            "p50_lexical_only": summaries["lexical_only"]["p50"],
            "p95_lexical_only": summaries["lexical_only"]["p95"],
            "chunks": grown.chunks,
            "questions": len(sample),
            "top_k": RETRIEVAL_TOP_K,
        }
    return described, retrieval


def _server_step(
    *,
    corpus_size: int,
    clients: list[bench_clients.Client],
    samples: list[list[str]],
    options: BenchOptions,
    conversation: LongConversation,
    say: Say,
) -> dict[str, Any]:
    """Start the server on the current database, measure against it, always stop it."""
    figures: dict[str, Any] = {}
    loads = min(CONVERSATION_LOADS_MAX, max(CONVERSATION_LOADS_MIN, options.questions))
    try:
        with server_running(
            database_url=database_url(),
            # One user asks question after question as fast as answers come: no flood rule.
            env={"CHAT_RATE_LIMIT": SERVER_RATE_LIMIT, "CHAT_FLOOD_MIN_INTERVAL": "0"},
            processes=options.web_processes,
        ) as server:
            figures["server"] = {
                "address": server.http_url,
                "processes": options.web_processes,
                # The server reads the same environment: its answers worked on at once.
                "answer_slots": settings.CHAT_ANSWER_SLOTS,
                "corpus_chunks": corpus_size,
                "users": "one per client",
                "rate_limit": f"CHAT_RATE_LIMIT={SERVER_RATE_LIMIT} and "
                "CHAT_FLOOD_MIN_INTERVAL=0 in the server's environment (checked on every "
                "request, never reached)",
            }
            say(f"Server (daphne) up at {server.http_url}, pid {server.process.pid}.")
            asyncio.run(
                _server_measure(
                    server,
                    figures,
                    clients=clients,
                    samples=samples,
                    options=options,
                    conversation=conversation,
                    loads=loads,
                )
            )
            server.check_alive()
            figures["server_peak_rss_mb"] = server.peak_rss_mb()
            figures["server_peak_rss_mb_each"] = server.peak_rss_mb_each()
    finally:
        database_sessions_end()  # so that the throwaway database can be dropped
    return figures


async def _server_measure(
    server: RunningServer,
    figures: dict[str, Any],
    *,
    clients: list[bench_clients.Client],
    samples: list[list[str]],
    options: BenchOptions,
    conversation: LongConversation,
    loads: int,
) -> None:
    """`samples`: the questions of each measured run, in order (one list per transport ×
    concurrency)."""
    first, total, counts = await _answers_measure(
        server, clients=clients, samples=samples, options=options, processes=options.web_processes
    )
    figures["first_event_ms"] = first
    figures["total_ms"] = total
    figures["exchanges"] = counts
    figures["errors"] = _errors(counts)

    times = await bench_clients.conversation_loads(
        server, clients[0], conversation.id, count=loads, messages=conversation.messages
    )
    api, page = latency_summary(times["api"]), latency_summary(times["page"])
    figures["conversation_load_ms"] = {
        # The slower of the two ways to open it, figure by figure.
        "p50": max(api["p50"], page["p50"]),
        "p95": max(api["p95"], page["p95"]),
        "api": {"p50": api["p50"], "p95": api["p95"]},
        "page": {"p50": page["p50"], "p95": page["p95"]},
        "messages": conversation.messages,
        "citations": conversation.citations,
        "loads": loads,
    }
    # The same figures on their own, by the way the conversation is opened.
    figures["conversation_api_load_ms"] = {"p50": api["p50"], "p95": api["p95"]}
    figures["conversation_page_load_ms"] = {"p50": page["p50"], "p95": page["p95"]}


def _database_server_pid_closing() -> int | None:
    """`database_server_pid()` from a worker thread, closing the thread's connection after:
    left open, it outlives the thread and `database_sessions_end` waits its whole timeout
    (5 s) for it before terminating it."""
    try:
        return database_server_pid()
    finally:
        connection.close()


async def _answers_measure(
    server: RunningServer,
    *,
    clients: list[bench_clients.Client],
    samples: list[list[str]],
    options: BenchOptions,
    processes: int,
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """Warm the server up, then time the answers at each concurrency over both transports:
    (first event, total, counts), each {transport: {concurrency: ...}}."""
    # Warm-up (not measured): the first answers load what the server loads lazily, in each
    # process (connections go to the processes as the kernel hands them out: ask a few times).
    for transport in TRANSPORTS:
        for _ in range(2 * processes):
            await bench_clients.load_run(
                server, transport=transport, clients=clients[:1], questions=[[WARM_UP_QUESTION]]
            )
    run_samples = iter(samples)
    database_pid = await asyncio.to_thread(_database_server_pid_closing)
    first: dict[str, dict[str, Any]] = {t: {} for t in TRANSPORTS}
    total: dict[str, dict[str, Any]] = {t: {} for t in TRANSPORTS}
    counts: dict[str, dict[str, Any]] = {t: {} for t in TRANSPORTS}
    for step, concurrency in enumerate(options.concurrency):
        # Which transport goes first alternates, so that neither always meets the same
        # moment of the machine's load.
        for transport in TRANSPORTS if step % 2 == 0 else TRANSPORTS[::-1]:
            assigned = questions_per_client(next(run_samples), concurrency)
            asked = sum(len(own) for own in assigned)
            cpu_before = _cpu_seconds(server, database_pid)
            log_start = log_offset(server.log_path)
            with _bar(asked, f"{transport} × {concurrency} clients", "q") as bar:
                exchanges = await bench_clients.load_run(
                    server,
                    transport=transport,
                    clients=clients[1 : concurrency + 1],
                    questions=assigned,
                    done=lambda bar=bar: bar.update(1),
                )
            cpu_after = _cpu_seconds(server, database_pid)
            server.check_alive()
            answered = [e for e in exchanges if e.outcome != "error" and e.first_ms is not None]
            first_s = latency_summary([e.first_ms for e in answered])
            total_s = latency_summary([e.total_ms for e in answered])
            first[transport][str(concurrency)] = {"p50": first_s["p50"], "p95": first_s["p95"]}
            total[transport][str(concurrency)] = {"p50": total_s["p50"], "p95": total_s["p95"]}
            errors = [e for e in exchanges if e.outcome == "error"]
            counts[transport][str(concurrency)] = {
                "questions": len(exchanges),
                "answers": sum(e.outcome == "answer" for e in exchanges),
                "refusals": sum(e.outcome == "refusal" for e in exchanges),
                "errors": len(errors),
                "resent": sum(e.resent for e in exchanges),
                "cpu_ms_per_question": _cpu_ms_per_question(cpu_before, cpu_after, len(exchanges)),
                "stage_cpu_ms": stage_cpu_per_question(server.log_path, log_start),
                **({"first_error": errors[0].detail} if errors else {}),
            }
    return first, total, counts
