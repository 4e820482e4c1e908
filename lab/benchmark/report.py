"""The benchmark's figures as the plain-text report `manage.py bench` prints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lab.benchmark.corpus import RETRIEVAL_TOP_K
from lab.benchmark.stages import stages_text

TRANSPORT_NAMES = {"ws": "WebSocket", "sse": "SSE"}


def _table(rows: Sequence[Sequence[object]], indent: str = "  ") -> list[str]:
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(rows[0]))]
    lines = [
        indent + "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines.insert(1, indent + "  ".join("-" * width for width in widths))
    return [line.rstrip() for line in lines]


def _pair(figures: dict[str, Any], a: str = "p50", b: str = "p95") -> str:
    return f"{figures[a]:.1f} / {figures[b]:.1f} ms"


def _cpu(per: dict[str, Any]) -> str:
    server, database = per.get("server"), per.get("database")
    if server is None:
        return "—"
    if database is None:
        return f"{server:.0f} + ?"
    return f"{server:.0f} + {database:.0f}"


def report_text(figures: dict[str, Any]) -> str:
    """The figures of `bench_run` as sections of aligned tables."""
    ingest, corpus, server = figures["ingest"], figures["corpus"], figures.get("server", {})
    lines = [
        f"Sourced benchmark: dataset {figures['dataset']}, {figures['cpus']} CPU cores, "
        "everything in a throwaway database (dropped at the end)"
        + (
            f"; PostgreSQL's shared buffers {figures['shared_buffers']}."
            if figures.get("shared_buffers")
            else "."
        ),
    ]
    load = figures.get("load_average") or {}
    if load.get("start") is not None and load.get("end") is not None:
        lines.append(
            f"Machine load (1-minute load average) at the start / end: {load['start']:.1f} / "
            f"{load['end']:.1f}; above {figures['cpus']}, other processes competed for the CPU "
            "and the times are inflated."
        )
    lines += [
        "",
        f"Ingestion: {ingest['documents']} documents written as files, real ingestion code "
        "(parse, chunk, embed, store)",
    ]
    lines += _table(
        [
            ("", "chunks", "seconds", "chunks/s"),
            ("ingestion", ingest["chunks"], f"{ingest['seconds']:.2f}", ingest["chunks_per_s"]),
            (
                "embedding model alone (embed_texts, same texts)",
                ingest["chunks"],
                f"{ingest['raw_embed_seconds']:.2f}",
                ingest["raw_embed_chunks_per_s"],
            ),
        ]
    )
    lines.append(f"  ratio ingestion / model alone: {ingest['ratio']:.2f}")
    if ingest.get("sentences"):
        lines.append(
            f"  Ingestion also embeds the chunks' {ingest['sentences']} distinct answerable "
            f"sentences (stored for answering): the model alone on chunks + sentences took "
            f"{ingest['raw_embed_all_seconds']:.2f} s, ratio {ingest['ratio_all']:.2f}."
        )

    lines += [
        "",
        f"Retrieval: chunks_search hybrid, top_k {RETRIEVAL_TOP_K}, "
        f"{figures['questions']} questions of the dataset at each size",
    ]
    rows: list[Sequence[object]] = [
        (
            "corpus (requested)",
            "chunks",
            "hybrid p50 / p95",
            "hybrid incl. query embedding",
            "vector side only",
            "lexical side only",
        )
    ]
    for size, entry in figures["retrieval_ms"].items():
        rows.append(
            (
                f"{int(size):,}",
                f"{entry['chunks']:,}",
                _pair(entry),
                _pair(entry, "p50_with_embedding", "p95_with_embedding"),
                _pair(entry, "p50_vector_only", "p95_vector_only"),
                _pair(entry, "p50_lexical_only", "p95_lexical_only"),
            )
        )
    lines += _table(rows)
    lines.append(
        "  Hybrid = what the chat runs (both sides, fused); the one-sided figures (mode vector / "
        "lexical, query vector given) show where the time goes."
    )
    lines.append(
        f"  The corpus is {corpus['real_chunks']:,} real chunks plus SYNTHETIC copies: "
        f"{corpus['synthetic']}."
    )
    for size, entry in corpus["sizes"].items():
        if entry["added"]:
            lines.append(
                f"  Growing to {int(size):,}: {entry['added']:,} synthetic chunks loaded in "
                f"{entry['load_s']:.1f}s, indexes rebuilt in {entry['index_rebuild_s']:.1f}s "
                f"(maintenance_work_mem {entry.get('index_build_memory_mb', '?')} MB); "
                f"database {entry.get('database_mb', '?')} MB, benchmark process peak RSS "
                f"{entry.get('bench_peak_rss_mb', '?')} MB."
            )
        elif entry["chunks"] > int(size):
            lines.append(
                f"  {int(size):,} chunks requested: the corpus already holds "
                f"{entry['chunks']:,}, measured at that size."
            )

    if "first_event_ms" in figures:
        lines += [
            "",
            f"Answers against a running server: {server.get('processes', 1)} daphne process(es) "
            f"at {server['address']}{_slots(server)}, "
            f"{server['corpus_chunks']:,} chunks, extractive mode",
        ]
        rows = [
            (
                "transport",
                "clients",
                "questions",
                "first answer event p50 / p95",
                "total p50 / p95",
                "answers",
                "refusals",
                "errors",
                "CPU ms/question server + database",
            )
        ]
        for transport, per in figures["first_event_ms"].items():
            for concurrency, first in per.items():
                counts = figures["exchanges"][transport][concurrency]
                rows.append(
                    (
                        TRANSPORT_NAMES.get(transport, transport),
                        concurrency,
                        counts["questions"],
                        _pair(first),
                        _pair(figures["total_ms"][transport][concurrency]),
                        counts["answers"],
                        counts["refusals"],
                        counts["errors"],
                        _cpu(counts.get("cpu_ms_per_question") or {}),
                    )
                )
        lines += _table(rows)
        lines += ["  CPU ms/question by stage (the server threads' own time, from its log):"]
        for transport, per in figures["exchanges"].items():
            for concurrency, counts in per.items():
                name = TRANSPORT_NAMES.get(transport, transport)
                stages = stages_text(counts.get("stage_cpu_ms") or {})
                lines.append(f"    {name} × {concurrency}: {stages}")
        lines += [
            "  First answer event: the first answer text (WebSocket: the first fragment "
            "appended to the answer; SSE: the first answer_delta) or the refusal. Total: until "
            "the chat is idle again (WebSocket) / the stream ends (SSE). Times from the send.",
            "  CPU ms/question: CPU time the server's processes and the PostgreSQL server used "
            "during the run, divided by its questions (what the rest of the machine runs does "
            "not count: the figure to compare across noisy runs).",
            f"  Each client is its own staff user with one conversation, asking its questions "
            f"back to back; {server['rate_limit']}.",
        ]
        resent = sum(c["resent"] for per in figures["exchanges"].values() for c in per.values())
        if resent:
            lines.append(
                f"  {resent} WebSocket questions were sent again: the consumer had already "
                "signalled idle but still held the previous answer (time counted from the "
                "first send)."
            )
        for transport, per in figures["exchanges"].items():
            for concurrency, counts in per.items():
                if counts.get("first_error"):
                    lines.append(
                        f"  First error, {TRANSPORT_NAMES.get(transport, transport)} × "
                        f"{concurrency}: {counts['first_error']}"
                    )

    if "conversation_load_ms" in figures:
        load = figures["conversation_load_ms"]
        lines += [
            "",
            f"Conversation load: {load['messages']} messages with {load['citations']} "
            f"citations, {load['loads']} loads of each",
        ]
        lines += _table(
            [
                ("how", "p50 / p95"),
                ("GET /api/conversations/<id>/messages (token)", _pair(load["api"])),
                ("conversation page /c/<id>/ (session)", _pair(load["page"])),
                ("the slower of the two", _pair(load)),
            ]
        )

    if figures.get("while_reading"):
        reading = figures["while_reading"]
        lines += [
            "",
            f"Answers while files are read: {reading['files']} personal files of "
            f"{reading['pages']} pages read by an ingestion worker process (niceness "
            f"+{reading['worker_nice']}) vs. none, WebSocket, {reading['rounds']} rounds of each "
            f"in turns; load {reading['load_average_start']} → {reading['load_average_end']}",
        ]
        rows = [("clients", "first event idle p50 / p95", "while reading p50 / p95", "p95 ratio")]
        for concurrency, per in reading["first_event_ms"].items():
            rows.append((concurrency, _pair(per["idle"]), _pair(per["reading"]), per["p95_ratio"]))
        lines += _table(rows)
        lines.append(
            f"  Files still unread at the end of each reading run: {reading['unread_at_end']} "
            "(0: the reading ended before the run did); errors: "
            f"{reading['errors']}."
        )

    if figures.get("process_comparison"):
        lines += [
            "",
            "Web processes compared (the same questions, servers started in turns):",
        ]
        rows = [
            (
                "processes",
                "round",
                "load at start",
                "WS 1 / 20 clients first event p50 / p95",
                "SSE 1 / 20 clients first event p50 / p95",
                "peak memory",
            )
        ]
        for processes, rounds in figures["process_comparison"].items():
            for i, entry in enumerate(rounds, start=1):
                cells = []
                for transport in ("ws", "sse"):
                    per = entry["first_event_ms"][transport]
                    cells.append(" · ".join(_pair(per[c]) for c in sorted(per, key=int)))
                peak = entry["peak_rss_mb"]
                rows.append(
                    (
                        processes,
                        i,
                        entry["load_average_start"],
                        cells[0],
                        cells[1],
                        f"{peak:.0f} MB" if peak else "?",
                    )
                )
        lines += _table(rows)

    if "server_peak_rss_mb" in figures:
        peak = figures["server_peak_rss_mb"]
        each = [f"{mb:.0f}" for mb in figures.get("server_peak_rss_mb_each") or [] if mb]
        processes = figures.get("server", {}).get("processes", 1)
        lines += [
            "",
            f"Server peak memory (VmHWM of the {processes} daphne process(es), added): "
            + (f"{peak:.0f} MB" if peak is not None else "unavailable")
            + (f" ({' + '.join(each)} MB)" if len(each) > 1 else ""),
        ]

    if "collections" in figures:
        case = figures["collections"]
        recall = (
            f"{case['recall_at_5_restricted']:.3f} restricted vs "
            f"{case['recall_at_5_unrestricted']:.3f} unrestricted"
            if case["own_questions"]
            else "no question of theirs in the dataset"
        )
        lines += [
            "",
            f"Collections: the corpus in {case['collections']} collections, a reader of "
            f"{case['readable']} ({case['reader_chunks']:,} chunks); hybrid, top_k "
            f"{RETRIEVAL_TOP_K}, {case['questions']} questions, in turns "
            f"(load {case['load_average_start']} → {case['load_average_end']})",
        ]
        lines += _table(
            [
                ("who", "hybrid p50 / p95", "vector side only", "lexical side only"),
                (
                    "the reader of 3",
                    _pair(case, "p50_restricted", "p95_restricted"),
                    _pair(case, "p50_restricted_vector", "p95_restricted_vector"),
                    _pair(case, "p50_restricted_lexical", "p95_restricted_lexical"),
                ),
                (
                    "the reader, first search in a minute",
                    _pair(case, "p50_restricted_first", "p95_restricted_first"),
                    "",
                    "",
                ),
                (
                    "unrestricted",
                    _pair(case, "p50_unrestricted", "p95_unrestricted"),
                    _pair(case, "p50_unrestricted_vector", "p95_unrestricted_vector"),
                    _pair(case, "p50_unrestricted_lexical", "p95_unrestricted_lexical"),
                ),
            ]
        )
        lines.append(
            f"  p95 ratio restricted / unrestricted: {case['p95_ratio']} "
            f"({case['p95_ratio_first']} for the reader's first search in a minute, their rows "
            f"counted again); recall@5 of the "
            f"reader's {case['own_questions']} questions: {recall}; full top {RETRIEVAL_TOP_K} "
            f"for {case['own_full_top_k']} of them."
        )
    return "\n".join(lines)


def _slots(server: dict[str, Any]) -> str:
    """ " (N answers at once per process, CHAT_ANSWER_SLOTS)" when the figures hold it."""
    slots = server.get("answer_slots")
    if slots is None:
        return ""
    each = "no limit" if slots <= 0 else f"{slots} answers at once"
    return f" ({each} per process, CHAT_ANSWER_SLOTS)"
