"""Sentences of a chunk as the extractive answerer reads them: the one splitting that both
ingestion (which embeds each sentence once, knowledge.services) and answering
(chat.answering.extractive, which compares them with the question) use, so a sentence vector
stored at ingestion is found by the very text the answerer looks up. Chunking cuts documents
at the same sentence boundaries (`sentence_spans_covering`).

A prose chunk is cut into sentences (`sentence_spans`), a spreadsheet chunk into its rows, one
per line (`row_spans`); `answerable_spans` keeps the pieces an answer may quote (not headings,
table rows, page numbers or captions; at least MIN_WORDS words).
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache

MIN_WORDS = 3
# Chunk texts whose answerable pieces are remembered (`answerable_positions`): a question reads
# the pieces of its chunks three times (their stored vectors, the evidence check, the answer),
# and popular chunks come back with other questions; about 2 MB at most.
POSITIONS_CACHE_TEXTS = 1024

ABBREVIATIONS = {
    "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof", "st", "no", "nos", "fig",
    "approx", "dept", "inc", "ltd", "co", "corp", "jr", "sr", "jan", "feb", "mar", "apr",
    "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec", "mon", "tue", "wed", "thu", "fri",
    "sat", "sun", "al", "cf", "ca", "min", "max", "est", "vol", "pp", "ref", "u.s",
    "u.k", "a.m", "p.m",
}  # fmt: skip
WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")  # a word, as sentences and answers count them
_TERMINAL = re.compile(r"[.!?…]+[\"'”’)\]]*")
_NEXT_STARTS_SENTENCE = re.compile(r"\s+[\"'“‘(\[]?[A-Z0-9]")
_LIST_ITEM = re.compile(r"\s*(?:[-*•+▪–]|\d{1,3}[.)]|[a-z][.)])\s+")
_MARKUP_LINE = re.compile(r"\s*(?:#|\||```|---|===)")
# A page's furniture on a line of its own: "Page 3", "Page 3 of 12", "3 / 12".
_PAGE_NUMBER = re.compile(r"(?:page\s*)?\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?", re.IGNORECASE)
# A caption: "Table 2: Daily limits", "Figure 3. Approval flow" (a caption is no sentence).
_CAPTION = re.compile(r"(?:table|figure|fig\.|chart|exhibit)\s+[\dIVX]+[.:\s]", re.IGNORECASE)
_ENDS_SENTENCE = re.compile(r"[.!?…][\"'”’)\]]*$")


def text_hash(text: str) -> str:
    """sha256 of the text: the key of a chunk's text (`Chunk.text_hash`) and of a sentence's
    stored vector (`SentenceVector.text_hash`)."""
    return hashlib.sha256(text.encode()).hexdigest()


def answerable_spans(text: str, *, sheet: bool) -> list[tuple[int, int]]:
    """(start, end) of the pieces of a chunk an answer may quote: its rows when it comes from
    a spreadsheet, else its sentences; markup lines and pieces under MIN_WORDS words left out."""
    return [(start, end) for _, start, end in answerable_positions(text, sheet=sheet)]


@lru_cache(maxsize=POSITIONS_CACHE_TEXTS)
def answerable_positions(text: str, *, sheet: bool) -> tuple[tuple[int, int, int], ...]:
    """(position, start, end) of each piece of `answerable_spans`, `position` being its place
    among all the rows (`sheet`) or sentences of `text`, answerable or not. Remembered for the
    last POSITIONS_CACHE_TEXTS texts; a tuple, so no caller can change what the next one gets."""
    if sheet:
        return tuple(
            (position, start, end)
            for position, (start, end) in enumerate(row_spans(text))
            if is_answerable(text[start:end])
        )
    return tuple(
        (position, start, end)
        for position, (start, end) in enumerate(sentence_spans(text))
        if is_answerable(text[start:end]) and not is_heading_paragraph(text, start, end)
    )


_HEADING_NUMBER = re.compile(r"\d{1,2}(?:\.\d{1,2}){0,4}\.?\s+(?=[A-Z])")
HEADING_MAX_WORDS = 12


def is_heading_paragraph(text: str, start: int, end: int) -> bool:
    """The sentence `text[start:end]` is a numbered heading standing as a paragraph of its own
    ("5. Meals and subsistence", "4.1 Trains" between blank lines): a section number, at
    most HEADING_MAX_WORDS words starting with a capital, and no sentence's end."""
    paragraph_start = text.rfind("\n\n", 0, start)
    paragraph_start = 0 if paragraph_start < 0 else paragraph_start + 2
    paragraph_end = text.find("\n\n", end)
    paragraph_end = len(text) if paragraph_end < 0 else paragraph_end
    if text[end:paragraph_end].strip():
        return False
    paragraph = text[paragraph_start:end].strip()
    number = _HEADING_NUMBER.match(paragraph)
    if not number or start > paragraph_start + len(text[paragraph_start:end]) - len(
        paragraph[number.end() :]
    ):
        return False
    words = paragraph[number.end() :]
    return len(words.split()) <= HEADING_MAX_WORDS and not _ENDS_SENTENCE.search(words)


def is_answerable(piece: str) -> bool:
    """Not a markup line (heading, table row, rule), not a page number ("Page 3 of 12"), not
    a caption ("Table 2: Daily limits", without a sentence's end), and at least MIN_WORDS
    words. (Headings of every format are sections, not text: knowledge/parsers.)"""
    return (
        not _MARKUP_LINE.match(piece)
        and not _PAGE_NUMBER.fullmatch(piece)
        and not (_CAPTION.match(piece) and not _ENDS_SENTENCE.search(piece))
        and len(WORD.findall(piece)) >= MIN_WORDS
    )


def answerable_sentences(text: str, *, sheet: bool) -> list[str]:
    """The texts of `answerable_spans`, each distinct text once."""
    return list(
        dict.fromkeys(text[start:end] for start, end in answerable_spans(text, sheet=sheet))
    )


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text`, trimmed, list markers left out.

    Boundaries: blank lines; a line break before a list item or heading, or after a line ending
    in terminal punctuation or a colon; terminal punctuation followed by a capital or digit,
    unless the word before it is an abbreviation or an initial. A single line break inside a
    paragraph (wrapped text, PDF lines) is not a boundary.
    """
    spans: list[tuple[int, int]] = []
    for block_start, block_end in _blocks(text):
        marker = _LIST_ITEM.match(text, block_start, block_end)
        start = marker.end() if marker else block_start
        for match in _TERMINAL.finditer(text, start, block_end):
            end = match.end()
            follow = _NEXT_STARTS_SENTENCE.match(text, end, block_end)
            if not follow or _is_abbreviation(text, start, match.start()):
                continue
            spans.append((start, end))
            start = end
        spans.append((start, block_end))
    return [span for span in (span_trim(text, s, e) for s, e in spans) if span[1] > span[0]]


def sentence_spans_covering(text: str) -> list[tuple[int, int]]:
    """The sentences of `sentence_spans`, widened so that together they cover every non-space
    character of `text` and only whitespace lies between two of them: a sentence starts where
    the previous one ended (whitespace skipped), so a list marker stays with its item. What
    chunking cuts into (knowledge/chunking.py)."""
    covering: list[tuple[int, int]] = []
    previous = 0
    for _, end in sentence_spans(text):
        start = _trim_spaces(text, previous, end)[0]
        covering.append((start, end))
        previous = end
    rest_start, rest_end = _trim_spaces(text, previous, len(text))
    if rest_end > rest_start:  # a lone list marker after the last sentence
        if covering:
            covering[-1] = (covering[-1][0], rest_end)
        else:
            covering.append((rest_start, rest_end))
    return covering


def _blocks(text: str) -> list[tuple[int, int]]:
    """Spans of text between hard line boundaries."""
    lines: list[tuple[int, int]] = []
    position = 0
    for line in text.split("\n"):
        lines.append((position, position + len(line)))
        position += len(line) + 1
    blocks: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for start, end in lines:
        line = text[start:end]
        if not line.strip():
            if current:
                blocks.append(current)
            current = None
            continue
        breaks_before = (
            current is None
            or _LIST_ITEM.match(line)
            or _MARKUP_LINE.match(line)
            or _MARKUP_LINE.match(text[current[0] : current[1]])
            or text[current[0] : current[1]].rstrip().endswith((".", "!", "?", ":", "…"))
        )
        if breaks_before:
            if current:
                blocks.append(current)
            current = (start, end)
        else:
            current = (current[0], end)
    if current:
        blocks.append(current)
    return blocks


def _is_abbreviation(text: str, sentence_start: int, dot: int) -> bool:
    if text[dot] != ".":
        return False
    before = text[sentence_start:dot].split()
    if not before:
        return True
    word = before[-1].lstrip("(\"'“‘").lower()
    return word in ABBREVIATIONS or (len(word) == 1 and word.isalpha())


def span_trim(text: str, start: int, end: int) -> tuple[int, int]:
    """The span without surrounding whitespace and without a leading list marker."""
    start, end = _trim_spaces(text, start, end)
    marker = _LIST_ITEM.match(text, start, end)
    if marker and marker.end() < end:
        start = marker.end()
    return start, end


def row_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each line of a spreadsheet chunk (each a row), trimmed."""
    spans: list[tuple[int, int]] = []
    position = 0
    for line in text.split("\n"):
        start, end = _trim_spaces(text, position, position + len(line))
        if end > start:
            spans.append((start, end))
        position += len(line) + 1
    return spans


def _trim_spaces(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end
