"""The grounding pieces on their own: citation markers checked as the reply streams, the
sources within the context cap, the history window."""

from __future__ import annotations

import pytest

from chat.answering.followups import Turn
from chat.answering.grounding import (
    CONTEXT_TOKENS,
    CitationRewriter,
    removed_note,
    sources_block,
    sources_select,
    token_estimate,
)
from chat.answering.memory import NOT_ANSWERED, history_messages, history_window
from knowledge.retrieval import RetrievedChunk


def chunk(n: int, text: str = "") -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=n, document_id=1, document_title=f"Doc {n}", document_url="", chunk_index=n,
        page=None, section=None, text=text or f"Passage {n}.", excerpt="", similarity=0.5,
        score=0.5,
    )  # fmt: skip


def rewrite(pieces: list[str], provided: int = 3) -> tuple[str, CitationRewriter]:
    rewriter = CitationRewriter(provided={n: chunk(n) for n in range(1, provided + 1)})
    shown = [rewriter.feed(piece) for piece in pieces] + [rewriter.flush()]
    return "".join(shown), rewriter


@pytest.mark.parametrize(
    ("pieces", "text", "cited"),
    [
        (["A [1]. B [7]."], "A [1]. B.", [1]),
        (["A [", "3", "]. B [1", "]."], "A [1]. B [2].", [3, 1]),
        (["A [2, 7", "]. B [2]."], "A [1]. B [1].", [2]),
        (["See [the form](https://x.example) [1]."], "See [the form](https://x.example) [1].", [1]),
        (["Only invented [9] [8]."], "Only invented.", []),
        (["Trailing [2"], "Trailing [2", []),
    ],
)
def test_markers_are_kept_renumbered_or_removed_across_piece_boundaries(pieces, text, cited):
    shown, rewriter = rewrite(pieces)
    assert shown == text
    assert [c.chunk_id for _, c in rewriter.cited] == cited
    assert [n for n, _ in rewriter.cited] == list(range(1, len(cited) + 1))


def test_sources_are_whole_chunks_within_the_cap_best_first():
    long_text = "word " * 1000  # about 1250 tokens each
    chunks = [chunk(n, long_text) for n in range(1, 6)]
    chosen = sources_select(chunks)
    assert [c.chunk_id for c in chosen] == [1, 2]
    assert token_estimate(sources_block(chosen)) <= CONTEXT_TOKENS + 10
    assert sources_select([chunk(1, "word " * 5000)])  # the best one always goes


def test_the_history_window_keeps_at_least_the_two_latest_turns():
    turns = [Turn(f"Q{n}", answer=f"A{n} [1].", answered=n != 3) for n in range(1, 4)]
    assert history_window(0) == 2 and history_window(6) == 6
    messages = history_messages(turns, window=history_window(0))
    assert messages == [
        {"role": "user", "content": "Q2"},
        {"role": "assistant", "content": "A2."},
        {"role": "user", "content": "Q3"},
        {"role": "assistant", "content": NOT_ANSWERED},
    ]


def test_the_history_window_shrinks_when_its_turns_exceed_about_6000_tokens():
    short = [Turn(f"Q{n}", answer=f"A{n}.", answered=True) for n in range(1, 7)]
    assert history_window(6, short) == 6  # six short turns: the count decides
    # 2,500 estimated tokens each (10,000 characters): two fit in 6,000, a third does not
    long = [Turn(f"Q{n}", answer="x" * 10_000, answered=True) for n in range(1, 5)]
    assert history_window(6, long) == 2
    assert history_window(6, long[:2]) == 6  # nothing to fold yet
    assert history_window(6, [*long[:3], short[0]]) == 3  # the oldest long turn leaves
    huge = [Turn("Q", answer="x" * 40_000, answered=True) for _ in range(3)]
    assert history_window(6, huge) == 2  # never fewer than the last two turns


def test_the_removed_note_says_how_many_invalid_citations_were_removed():
    rewriter = CitationRewriter(provided={1: chunk(1)})
    shown = rewriter.feed("Leave is 25 days [1][4]. Ask HR [9].") + rewriter.flush()
    assert shown == "Leave is 25 days [1]. Ask HR."
    assert (rewriter.generated, rewriter.removed) == ([1, 4, 9], [4, 9])
    assert removed_note(rewriter.removed) == "\n\n(Removed 2 invalid citations)"
    assert removed_note([4]) == "\n\n(Removed invalid citation)"
    assert removed_note([]) == ""
