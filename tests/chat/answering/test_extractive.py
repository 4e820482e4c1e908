"""Extractive answers (docs/product.md §5): at most three verbatim sentences, each with its
marker."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from chat.answering import extractive, followups
from chat.answering.extractive import candidate_sentences, extractive_answer
from knowledge import embedding
from knowledge.retrieval import RetrievedChunk
from knowledge.sentences import sentence_spans
from tests.support.knowledge_base import (
    CAREER_TEXT,
    EXPENSES_TEXTS,
    LEAVE_TEXTS,
    SECURITY_TEXTS,
)


def retrieved(texts: list[str], similarities: list[float] | None = None) -> list[RetrievedChunk]:
    return [
        RetrievedChunk(
            chunk_id=100 + i,
            document_id=1 + i // 2,
            document_title=f"Document {1 + i // 2}",
            document_url="",
            chunk_index=i,
            page=None,
            section=None,
            text=text,
            excerpt=text[:200],
            similarity=(similarities or [0.6 - i * 0.01 for i in range(len(texts))])[i],
            score=1.0 / (61 + i),
        )
        for i, text in enumerate(texts)
    ]


def answer_for(question: str, texts: list[str]):
    vector, _ = embedding.embed_query(question)
    return extractive_answer(question=question, question_vector=vector, chunks=retrieved(texts))


def test_sentences_are_exact_spans_split_at_sentence_ends_not_at_abbreviations():
    text = (
        "# Leave\nStaff get 25 days, e.g. for holidays. Dr. Smith approves requests.\n"
        "Requests are made\nin the HR portal.\n\n- Unused days carry over. 3.5 days is the cap."
    )
    sentences = [text[start:end] for start, end in sentence_spans(text)]
    assert sentences == [
        "# Leave",
        "Staff get 25 days, e.g. for holidays.",
        "Dr. Smith approves requests.",
        "Requests are made\nin the HR portal.",
        "Unused days carry over.",
        "3.5 days is the cap.",
    ]


def test_headings_fragments_and_repeated_sentences_are_not_candidates():
    chunks = retrieved(["# Annual leave\nYou get 25 days a year.", "You get 25 days a year. Ok."])
    texts = [sentence.text for sentence in candidate_sentences(chunks)]
    assert texts == ["You get 25 days a year."]


def test_answer_picks_the_sentence_that_answers_the_question_verbatim_with_a_marker():
    answer = answer_for("How long must passwords be?", SECURITY_TEXTS + EXPENSES_TEXTS)
    first = answer.sentences[0]
    assert first.text == "Passwords must be at least 14 characters long and must never be reused."
    assert first.n == 1 and first.chunk.text == SECURITY_TEXTS[0]
    assert answer.text.startswith(first.text + " [1]")


def test_answer_has_at_most_three_sentences_all_verbatim_and_numbered_by_first_use():
    answer = answer_for(
        "What are the rules for annual leave and carrying over unused leave days?",
        LEAVE_TEXTS + EXPENSES_TEXTS,
    )
    assert 1 <= len(answer.sentences) <= 3
    numbers = [sentence.n for sentence in answer.sentences]
    assert list(dict.fromkeys(numbers)) == list(range(1, len(set(numbers)) + 1))
    for sentence in answer.sentences:
        assert sentence.text in sentence.chunk.text
    assert [n for n, _ in answer.cited_chunks] == sorted(set(numbers))


def test_answer_merges_several_chunks_when_several_hold_the_answer():
    answer = answer_for(
        "How many days of annual leave do full-time employees get, and how many can be "
        "carried over?",
        LEAVE_TEXTS,
    )
    assert {chunk.chunk_id for _, chunk in answer.cited_chunks} == {100, 101}


def test_streamed_pieces_join_to_exactly_the_answer_and_end_sentences_with_markers():
    answer = answer_for("What is the daily meal allowance?", EXPENSES_TEXTS + LEAVE_TEXTS)
    pieces = answer.pieces()
    assert "".join(pieces) == answer.text
    assert len(pieces) > len(answer.sentences)  # sentences arrive in several pieces
    assert pieces[-1] == f" [{answer.sentences[-1].n}]"


def test_answer_is_deterministic():
    question = "Which flights must be economy class?"
    answers = [answer_for(question, EXPENSES_TEXTS + LEAVE_TEXTS).text for _ in range(3)]
    assert answers[0] == answers[1] == answers[2]


def test_chunk_without_any_full_sentence_is_quoted_whole():
    chunks = retrieved(["VPN: yes"])
    answer = extractive_answer(
        question="VPN?", question_vector=np.ones(384, dtype=np.float32), chunks=chunks
    )
    assert answer.text == "VPN: yes [1]"


def test_only_the_best_matching_candidates_are_embedded_and_the_answer_is_still_found():
    texts = LEAVE_TEXTS + EXPENSES_TEXTS + SECURITY_TEXTS
    assert len(candidate_sentences(retrieved(texts))) > extractive.MAX_COMPARED_SENTENCES
    with extractive._cache_lock:
        extractive._vector_cache.clear()
    answer = answer_for("How long must passwords be?", texts)
    assert len(extractive._vector_cache) == extractive.MAX_COMPARED_SENTENCES
    first = answer.sentences[0]
    assert first.text == "Passwords must be at least 14 characters long and must never be reused."
    assert first.chunk.text == SECURITY_TEXTS[0]


def test_a_question_line_of_an_faq_never_opens_the_answer():
    faq = (
        "Q: How do I connect to the VPN? A: The VPN connects automatically outside the office; "
        "a green shield next to the clock shows it is on."
    )
    answer = answer_for("How can I tell the VPN is connected?", [faq])
    assert answer.sentences[0].text.startswith("A: The VPN connects automatically")


def test_a_sentence_about_the_document_itself_opens_only_an_answer_about_the_document():
    overview = (
        "This policy tells staff how to handle refund requests from customers. "
        "It is written for the Customer Success team and anyone who receives a refund request. "
        "Customers may ask for a refund within 30 days of their first payment."
    )
    answer = answer_for("What is the refund window for customers?", [overview])
    assert answer.sentences[0].text.startswith("Customers may ask for a refund within 30 days")
    # Asked about the document, its sentences about itself compete as any other.
    about = answer_for("Who is the refund policy written for?", [overview])
    assert about.sentences[0].text.startswith(("This policy tells", "It is written for"))


def test_sentences_right_after_what_was_said_follow_it_in_its_chunk_and_the_next():
    texts = [
        "The band formed in 1990 in Leeds. Their first album sold poorly. "
        "A second album followed in 1993. It reached the charts. They toured Japan in 1995.",
        "The singer left in 1996 after a dispute. The band split a year later.",
    ]
    chunks = [replace(chunk, document_id=1) for chunk in retrieved(texts)]
    candidates = candidate_sentences(chunks)
    said = "Their first album sold poorly. [1]"

    following = {candidates[i].text for i in extractive.follows_said(candidates, said)}

    next_chunk = {"The singer left in 1996 after a dispute.", "The band split a year later."}
    assert following == {"A second album followed in 1993.", "It reached the charts."} | next_chunk
    said = "They toured Japan in 1995. [1]"  # the chunk's last sentence
    assert {candidates[i].text for i in extractive.follows_said(candidates, said)} == next_chunk
    said = "The band split a year later. [2]"  # the last: nothing follows it
    assert extractive.follows_said(candidates, said) == []
    other_document = [replace(c, chunk=replace(c.chunk, document_id=2)) for c in candidates[5:]]
    assert not set(
        extractive.follows_said([*candidates[:5], *other_document], "They toured Japan in 1995.")
    )


def test_a_follow_up_prefers_what_comes_after_the_previous_answer():
    """ "What did Carter do in 1990?" answered, "What happened after?" read in context: the
    sentences after the one just given gain FOLLOWS_SAID_BONUS and one of them answers first."""
    texts = [CAREER_TEXT]
    question = "What did Carter do in 1990? What happened after?"  # as searched in context
    vector, _ = embedding.embed_query(question)
    chunks = retrieved(texts)
    said = "In 1990 Carter joined the band Slowdive as its drummer. [1]"

    plain = extractive_answer(question=question, question_vector=vector, chunks=chunks)
    after = extractive_answer(
        question=question,
        question_vector=vector,
        chunks=chunks,
        said=said,
        follows_bonus=followups.FOLLOWS_SAID_BONUS,
    )

    assert plain.sentences[0].text == said.removesuffix(" [1]")
    assert after.sentences[0].text.startswith(("Two years later", "After that"))
