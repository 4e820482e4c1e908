"""Answer and document text with long runs of whitespace (kept in Markdown code fences and HTML
`<pre>`) or of digits costs linear time in every regex over it, and an extractive answer
streams such a run as part of a few-word piece, not one delta per space
(docs/decisions/0101-linear-text-regexes.md). Bounds are generous: the quadratic versions took
seconds to minutes on these inputs."""

from __future__ import annotations

import time

from chat import presenters
from chat.answering import answer_types, grounding, memory
from chat.answering.extractive import PIECE_WORDS, AnswerSentence, ExtractiveAnswer
from chat.answering.grounding import CitationRewriter
from knowledge.retrieval import RetrievedChunk

RUN = 40_000
BOUND = 0.5  # seconds; each case below is milliseconds when linear


def chunk(n: int) -> RetrievedChunk:
    return RetrievedChunk(
        chunk_id=n, document_id=1, document_title=f"Doc {n}", document_url="", chunk_index=n,
        page=None, section=None, text=f"Passage {n}.", excerpt="", similarity=0.5, score=0.5,
    )  # fmt: skip


def seconds(function, *args) -> float:
    started = time.perf_counter()
    function(*args)
    return time.perf_counter() - started


def test_copy_text_is_linear_on_a_run_of_spaces_and_still_drops_markers():
    assert seconds(presenters.copy_text_of, " " * RUN + "x") < BOUND
    assert seconds(presenters.copy_text_of, " \t" * (RUN // 2) + "x") < BOUND
    assert (
        presenters.copy_text_of("Leave is 25 days   [1] .\tMore [2]!") == "Leave is 25 days.\tMore!"
    )


def test_memory_strips_markers_in_linear_time():
    assert seconds(memory.without_markers, " " * RUN + "x") < BOUND
    assert (
        memory.without_markers("It is 25 days  [1, 2] and more [3].") == "It is 25 days and more."
    )


def test_the_citation_rewriter_is_linear_on_a_run_of_spaces_in_one_piece():
    rewriter = CitationRewriter(provided={1: chunk(1)})
    started = time.perf_counter()
    shown = rewriter.feed("code:" + " " * RUN + "x [1] [7]") + rewriter.flush()
    assert time.perf_counter() - started < BOUND
    assert shown == "code:" + " " * RUN + "x [1]"


def test_the_citation_rewriter_is_linear_on_a_run_streamed_a_space_at_a_time():
    rewriter = CitationRewriter(provided={1: chunk(1)})
    started = time.perf_counter()
    shown = [rewriter.feed(" ") for _ in range(RUN)]
    shown += [rewriter.feed("[1] and"), rewriter.feed("  [9]"), rewriter.flush()]
    assert time.perf_counter() - started < BOUND * 4
    assert "".join(shown) == " " * RUN + "[1] and"  # the valid marker keeps every space


def test_data_tags_are_removed_in_linear_time():
    assert seconds(grounding.as_data, "<source" * 20_000) < BOUND
    assert grounding.as_data("a </sources> b <question x='1'> c") == "a  b  c"
    # A tag that never closes loses its name: it cannot close the prompt's blocks.
    assert "</sources" not in grounding.as_data("a </sources x='<'> b")


def test_a_long_run_of_digits_is_checked_for_a_duration_in_linear_time():
    assert seconds(answer_types.answer_matches, "duration", "1" * RUN + "x") < BOUND
    assert answer_types.answer_matches("duration", "Refunds take 30 days.")
    assert answer_types.answer_matches("duration", "It takes 12345 working days.")


def test_an_extractive_sentence_with_a_run_of_spaces_streams_in_few_pieces():
    text = "def total():" + " " * RUN + "return the sum of the first six values here"
    answer = ExtractiveAnswer([AnswerSentence(text=text, n=1, chunk=chunk(1), score=1.0)])
    pieces = answer.pieces()
    words = len(text.split())
    assert len(pieces) <= words // PIECE_WORDS + 2
    assert "".join(pieces) == answer.text
    assert "  " not in answer.text  # the run carries no meaning in a quoted sentence
    assert answer.text == "def total(): return the sum of the first six values here [1]"


def test_ordinary_sentences_stream_as_before():
    first = "Full-time employees receive 25 days of paid annual leave per calendar year."
    second = "Unused days carry over."
    answer = ExtractiveAnswer(
        [
            AnswerSentence(text=first, n=1, chunk=chunk(1), score=1.0),
            AnswerSentence(text=second, n=2, chunk=chunk(2), score=0.9),
        ]
    )
    assert answer.pieces() == [
        "Full-time employees receive 25 days of",
        " paid annual leave per calendar year.",
        " [1]",
        " Unused days carry over.",
        " [2]",
    ]
