"""Chunking measured with the model's own tokenizer: never over the limit, never across a
page or section, sentences whole, paragraphs preferred, a little overlap."""

from __future__ import annotations

import hashlib

import pytest

from knowledge import embedding
from knowledge.chunking import (
    CONTEXT_MAX_TOKENS,
    MAX_TOKENS,
    ChunkDraft,
    chunks_build,
    embedding_input,
    section_context,
)
from knowledge.parsers import ParsedDocument, document_parse
from knowledge.sentences import sentence_spans_covering
from tests.support import documents


def parse_markdown(text: str) -> ParsedDocument:
    return document_parse(data=text.encode(), name="doc.md")


@pytest.fixture(scope="module")
def long_document() -> tuple[ParsedDocument, list[ChunkDraft]]:
    parsed = parse_markdown(documents.long_markdown())
    return parsed, chunks_build(parsed=parsed)


def blocks_under(parsed: ParsedDocument, chunk: ChunkDraft):
    return [
        block
        for block in parsed.blocks
        if block.char_start < chunk.char_end and chunk.char_start < block.char_end
    ]


def sentence(words: int, topic: str) -> str:
    return f"The {topic} rule number {words} says " + " ".join(["staff"] * words) + "."


def test_no_chunk_exceeds_the_model_limit_on_a_long_document(long_document):
    parsed, chunks = long_document

    assert len(chunks) > 40
    for chunk in chunks:
        measured = embedding.token_count(chunk.embedding_input)  # heading path + text
        assert measured <= MAX_TOKENS
        assert measured == chunk.token_count


def test_chunks_are_the_extracted_text_at_their_offsets(long_document):
    parsed, chunks = long_document

    for position, chunk in enumerate(chunks):
        assert chunk.index == position
        assert parsed.text[chunk.char_start : chunk.char_end] == chunk.text
        assert chunk.text_hash == hashlib.sha256(chunk.text.encode()).hexdigest()


def test_no_text_is_lost(long_document):
    parsed, chunks = long_document
    covered = bytearray(len(parsed.text))
    for chunk in chunks:
        covered[chunk.char_start : chunk.char_end] = b"\x01" * (chunk.char_end - chunk.char_start)

    lost = [
        char
        for position, char in enumerate(parsed.text)
        if not covered[position] and not char.isspace()
    ]
    assert lost == []


@pytest.mark.parametrize("kind", ["pdf", "docx", "md", "html", "txt"])
def test_chunks_never_cross_a_page_or_section_boundary(sample_files, kind):
    path = sample_files[kind]
    parsed = document_parse(data=path.read_bytes(), name=path.name)

    chunks = chunks_build(parsed=parsed)

    assert chunks
    for chunk in chunks:
        for block in blocks_under(parsed, chunk):
            assert (block.page, block.section) == (chunk.page, chunk.section)


def test_long_document_chunks_stay_inside_their_sections(long_document):
    parsed, chunks = long_document

    assert len({chunk.section for chunk in chunks}) > 15
    for chunk in chunks:
        for block in blocks_under(parsed, chunk):
            assert block.section == chunk.section


def test_pages_of_a_pdf_are_never_mixed(sample_files):
    path = sample_files["pdf"]
    chunks = chunks_build(parsed=document_parse(data=path.read_bytes(), name=path.name))

    assert [chunk.page for chunk in chunks] == [1, 2, 3]
    assert "45 pence per mile" in chunks[2].text
    assert "45 pence" not in chunks[1].text


def test_sentences_are_never_split_when_they_fit():
    sentences = [sentence(8 + (i * 7) % 30, "travel") for i in range(40)]
    parsed = parse_markdown("# Policy\n\n" + " ".join(sentences) + "\n")

    chunks = chunks_build(parsed=parsed)

    assert len(chunks) > 2
    for chunk in chunks:
        assert chunk.text.startswith("The travel rule")
        assert chunk.text.endswith(".")
        pieces = [chunk.text[s:e] for s, e in sentence_spans_covering(chunk.text)]
        assert all(piece in sentences for piece in pieces)


def test_neighbouring_chunks_overlap_by_one_sentence():
    sentences = [sentence(10 + i % 5, "expense") for i in range(40)]
    parsed = parse_markdown("# Policy\n\n" + " ".join(sentences) + "\n")

    chunks = chunks_build(parsed=parsed)

    assert len(chunks) > 2
    for previous, chunk in zip(chunks, chunks[1:], strict=False):
        assert chunk.char_start < previous.char_end
        shared = parsed.text[chunk.char_start : previous.char_end]
        assert shared in sentences  # exactly one whole sentence is repeated
        assert previous.text.endswith(shared)


def test_an_over_long_sentence_is_cut_at_word_boundaries():
    words = " ".join(f"clause{i % 50} applies" for i in range(700))  # one sentence, no stop
    parsed = parse_markdown(f"# Contract\n\n{words}\n")

    chunks = chunks_build(parsed=parsed)

    assert len(chunks) >= 4
    text = parsed.text
    for chunk in chunks:
        assert chunk.token_count <= MAX_TOKENS
        assert chunk.char_start == 0 or text[chunk.char_start - 1].isspace()
        assert chunk.char_end == len(text) or text[chunk.char_end].isspace()
    assert " ".join(c.text for c in chunks).split() == words.split()


def test_a_paragraph_that_fits_the_limit_stays_whole():
    paragraph = " ".join(sentence(12, f"leave{i}") for i in range(12))  # ~ 230 pieces
    assert 200 < embedding.token_count(paragraph) <= MAX_TOKENS
    parsed = parse_markdown(f"# Leave\n\n{paragraph}\n")

    chunks = chunks_build(parsed=parsed)

    assert [chunk.text for chunk in chunks] == [paragraph]


def test_short_paragraphs_are_merged_and_chunks_end_at_paragraph_ends():
    short = [f"Short note {i} about the office kitchen rota." for i in range(4)]
    medium = [" ".join(sentence(14, f"desk{i}{j}") for j in range(5)) for i in range(4)]
    parsed = parse_markdown(
        "# Office\n\n## Kitchen\n\n"
        + "\n\n".join(short)
        + "\n\n## Desks\n\n"
        + "\n\n".join(medium)
        + "\n"
    )

    chunks = chunks_build(parsed=parsed)

    kitchen = [c for c in chunks if c.section == "Office > Kitchen"]
    assert [c.text for c in kitchen] == ["\n\n".join(short)]
    desks = [c for c in chunks if c.section == "Office > Desks"]
    paragraph_starts = {block.char_start for block in parsed.blocks}
    paragraph_ends = {block.char_end for block in parsed.blocks}
    assert len(desks) >= 3
    assert all(chunk.char_end in paragraph_ends for chunk in desks)
    assert all(chunk.char_start in paragraph_starts for chunk in desks)  # no overlap here


def test_the_model_reads_the_heading_path_before_the_text():
    parsed = parse_markdown("# Handbook\n\n## Leave\n\n### Annual leave\n\nStaff get 25 days.\n")

    (chunk,) = chunks_build(parsed=parsed)

    assert chunk.text == "Staff get 25 days."
    assert chunk.embedding_input == "Handbook > Leave > Annual leave\n\nStaff get 25 days."
    assert chunk.token_count == embedding.token_count(chunk.embedding_input)
    assert embedding_input(text="No headings.", section=None) == "No headings."


def test_long_heading_paths_are_shortened_and_counted_against_the_limit():
    headings = [  # about 19 word pieces each: three do not fit in the context, two do
        f"Chapter {level} on the interoperability of pseudonymisation, confidentiality and "
        "whistleblowing in procurement"
        for level in (1, 2, 3)
    ]
    deep = "\n\n".join(f"{'#' * (i + 1)} {h}" for i, h in enumerate(headings))
    body = " ".join(sentence(10 + i % 7, "security") for i in range(60))
    parsed = parse_markdown(f"{deep}\n\n{body}\n")

    chunks = chunks_build(parsed=parsed)

    context = section_context(chunks[0].section)
    assert context == f"{headings[1]} > {headings[2]}"  # the outermost heading was dropped
    assert embedding.token_count(context) - 2 <= CONTEXT_MAX_TOKENS
    for chunk in chunks:
        assert chunk.embedding_input.startswith(context + "\n\n")
        assert chunk.token_count == embedding.token_count(chunk.embedding_input) <= MAX_TOKENS


def test_tokenizer_work_is_batched(monkeypatch):
    text = documents.long_markdown(seed=11)
    calls = {"token_count": 0, "token_counts": 0}
    real_counts = embedding.token_counts

    def count_one(text):
        calls["token_count"] += 1
        return embedding.token_count(text)

    def count_many(texts):
        calls["token_counts"] += 1
        return real_counts(texts)

    monkeypatch.setattr(embedding, "token_count", count_one)
    monkeypatch.setattr(embedding, "token_counts", count_many)

    chunks = chunks_build(parsed=parse_markdown(text))

    assert len(chunks) > 40
    assert calls["token_count"] == 0
    assert calls["token_counts"] <= 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Dr. Smith approved it on Jan. 5. The U.S. office agreed, e.g. in writing. Done!",
            [
                "Dr. Smith approved it on Jan. 5.",
                "The U.S. office agreed, e.g. in writing.",
                "Done!",
            ],
        ),
        (
            "Is leave paid? Yes. See section 4.2 for details.",
            ["Is leave paid?", "Yes.", "See section 4.2 for details."],
        ),
        (
            'He said "stop." Then J. R. Tolkien left.',
            ['He said "stop."', "Then J. R. Tolkien left."],
        ),
        ("Items:\n- pens\n- paper", ["Items:", "- pens", "- paper"]),
    ],
)
def test_sentence_boundaries(text, expected):
    assert [text[s:e] for s, e in sentence_spans_covering(text)] == expected


def test_an_over_long_heading_is_cut_to_the_context_limit():
    heading = " ".join(["reimbursement"] * 80)

    context = section_context(f"Handbook > {heading}")

    assert heading.startswith(context)
    assert embedding.token_count(context) - 2 <= CONTEXT_MAX_TOKENS
