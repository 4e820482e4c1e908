"""Cut a parsed document into chunks the embedding model reads whole.

Rules, in order of strength:
1. A chunk never holds more than `MAX_TOKENS` word pieces of the model's own tokenizer,
   special tokens included: the model never silently truncates a chunk.
2. A chunk never crosses a page or a section boundary (consecutive blocks with the same
   page and section form a group; chunks are cut inside groups only).
3. Sentences stay whole; only a sentence that alone exceeds the limit is cut, on word
   boundaries (a line break preferred), by counting tokens.
4. Paragraphs stay whole when they fit; short neighbouring paragraphs are merged up to
   `TARGET_TOKENS`; a chunk ends at a paragraph boundary whenever it can.
5. Neighbouring chunks of a group overlap by one sentence (the previous chunk's last one)
   when that sentence is short and still fits.

Token counts are computed once per sentence in one batched tokenizer call. BERT's word-piece
tokenizer splits on whitespace first, so a run of sentences joined by whitespace has exactly
the sum of their pieces; every finished chunk is counted again (one more batched call) and
anything over the limit is cut again, so rule 1 holds even where that sum is off.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby

from knowledge import embedding
from knowledge.parsing import Block, ParsedDocument

MAX_TOKENS = embedding.MAX_TOKENS  # 256, [CLS] and [SEP] included
TARGET_TOKENS = 200  # merge paragraphs up to this; a single paragraph may use the full limit
OVERLAP_MAX_TOKENS = 48  # longest sentence repeated at the head of the next chunk
SPECIAL_TOKENS = 2  # [CLS] ... [SEP]


@dataclass(frozen=True)
class ChunkDraft:
    index: int
    text: str
    page: int | None
    section: str | None
    char_start: int
    char_end: int
    token_count: int  # pieces the model sees, special tokens included
    text_hash: str


@dataclass(frozen=True)
class _Unit:
    """A sentence (or a piece of an over-long one): offsets into the document text and its
    word pieces without the special tokens."""

    start: int
    end: int
    tokens: int


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def chunks_build(
    *,
    parsed: ParsedDocument,
    max_tokens: int = MAX_TOKENS,
    target_tokens: int = TARGET_TOKENS,
    overlap_tokens: int = OVERLAP_MAX_TOKENS,
) -> list[ChunkDraft]:
    """The chunks of `parsed`, in document order, every one within `max_tokens`."""
    body_max = max_tokens - SPECIAL_TOKENS
    target_body = min(target_tokens, max_tokens) - SPECIAL_TOKENS
    text = parsed.text

    spans_per_block = [
        [(block.char_start + s, block.char_start + e) for s, e in sentence_spans(block.text)]
        for block in parsed.blocks
    ]
    flat = [span for spans in spans_per_block for span in spans]
    counts = embedding.token_counts([text[s:e] for s, e in flat])
    body_counts = iter(count - SPECIAL_TOKENS for count in counts)

    paragraphs: list[tuple[Block, list[_Unit]]] = []
    for block, spans in zip(parsed.blocks, spans_per_block, strict=True):
        units: list[_Unit] = []
        for start, end in spans:
            tokens = next(body_counts)
            if tokens <= body_max:
                units.append(_Unit(start, end, tokens))
            else:
                units.extend(_split_long(text, start, end, body_max))
        if units:
            paragraphs.append((block, units))

    pieces: list[tuple[Block, list[_Unit]]] = []
    for _, group in groupby(paragraphs, key=lambda item: (item[0].page, item[0].section)):
        group = list(group)
        first_block = group[0][0]
        packed = _pack([units for _, units in group], target_body, body_max)
        for units in _overlap(packed, overlap_tokens, body_max):
            pieces.append((first_block, units))

    return _finish(text, pieces, max_tokens)


def _pack(paragraphs: list[list[_Unit]], target_body: int, body_max: int) -> list[list[_Unit]]:
    """Greedy packing that ends chunks at paragraph boundaries whenever possible."""
    chunks: list[list[_Unit]] = []
    current: list[_Unit] = []
    size = 0

    def flush() -> None:
        nonlocal current, size
        if current:
            chunks.append(current)
        current, size = [], 0

    for paragraph in paragraphs:
        paragraph_size = sum(unit.tokens for unit in paragraph)
        if current and size + paragraph_size <= target_body:
            current.extend(paragraph)
            size += paragraph_size
            continue
        flush()
        if paragraph_size <= body_max:  # a whole paragraph that fits stays whole
            current, size = list(paragraph), paragraph_size
            continue
        for unit in paragraph:  # a long paragraph: whole sentences up to the target
            if current and size + unit.tokens > target_body:
                flush()
            current.append(unit)
            size += unit.tokens
    flush()
    return chunks


def _overlap(chunks: list[list[_Unit]], overlap_tokens: int, body_max: int) -> list[list[_Unit]]:
    """Start each chunk with the previous chunk's last sentence when it is short and fits."""
    result: list[list[_Unit]] = []
    for position, units in enumerate(chunks):
        if position:
            previous = chunks[position - 1]
            tail = previous[-1]
            size = sum(unit.tokens for unit in units)
            if (
                len(previous) > 1
                and tail.tokens <= overlap_tokens
                and size + tail.tokens <= body_max
            ):
                units = [tail, *units]
        result.append(units)
    return result


def _finish(
    text: str, pieces: list[tuple[Block, list[_Unit]]], max_tokens: int
) -> list[ChunkDraft]:
    """Drafts from packed units; each chunk is counted again and cut again if over the limit."""
    spans = [(block, units[0].start, units[-1].end) for block, units in pieces]
    counts = embedding.token_counts([text[start:end] for _, start, end in spans])
    drafts: list[ChunkDraft] = []
    for (block, start, end), count in zip(spans, counts, strict=True):
        for piece_start, piece_end, piece_count in _fit(text, start, end, count, max_tokens):
            piece = text[piece_start:piece_end]
            drafts.append(
                ChunkDraft(
                    index=len(drafts),
                    text=piece,
                    page=block.page,
                    section=block.section,
                    char_start=piece_start,
                    char_end=piece_end,
                    token_count=piece_count,
                    text_hash=text_hash(piece),
                )
            )
    return drafts


def _fit(text: str, start: int, end: int, count: int, max_tokens: int) -> list[tuple]:
    if count <= max_tokens:
        return [(start, end, count)]
    # Rarely reached (a word cut in the middle re-tokenises differently): cut by tokens with
    # a margin, count again, repeat until everything fits.
    for margin in (4, 16, 64):
        units = _split_long(text, start, end, max_tokens - SPECIAL_TOKENS - margin)
        counts = embedding.token_counts([text[u.start : u.end] for u in units])
        if all(c <= max_tokens for c in counts):
            return [(u.start, u.end, c) for u, c in zip(units, counts, strict=True)]
    raise ValueError(f"Could not cut text at {start}:{end} into pieces of {max_tokens} tokens.")


def _split_long(text: str, start: int, end: int, body_max: int) -> list[_Unit]:
    """Cut text[start:end] into pieces of at most `body_max` word pieces, at word starts
    (a line start preferred), in the middle of a word only when one word is that long."""
    piece = text[start:end]
    offsets = embedding.get_tokenizer()(
        piece, add_special_tokens=False, return_offsets_mapping=True
    )["offset_mapping"]
    units: list[_Unit] = []
    i, total = 0, len(offsets)
    while i < total:
        j = min(i + body_max, total)
        if j < total:
            j = _cut_point(piece, offsets, i, j)
        units.append(_Unit(start + offsets[i][0], start + offsets[j - 1][1], j - i))
        i = j
    return units


def _cut_point(piece: str, offsets: Sequence[tuple[int, int]], i: int, j: int) -> int:
    """The token index in (i, j] to cut before: a line start in the second half of the
    window, else the last word start, else j (inside a word longer than the window)."""
    half = i + (j - i) // 2
    last_word_start = None
    for k in range(j, i, -1):
        begin = offsets[k][0]
        if begin == 0 or not piece[begin - 1].isspace():
            continue
        if k >= half and "\n" in piece[offsets[k - 1][1] : begin]:
            return k
        if last_word_start is None:
            last_word_start = k
        if k < half:
            break
    return last_word_start or j


# --- Sentences ---------------------------------------------------------------------------

# End punctuation, optional closing quotes/brackets, then whitespace.
_SENTENCE_END = re.compile(r"[.!?…。！？]+[\"'”’)\]]*(?=\s)")
# A line that starts a list item ("- x", "* x", "• x", "1. x", "2) x") also starts a sentence.
_LIST_LINE = re.compile(r"\n[ \t]*(?=(?:[-*•]|\d{1,3}[.)])\s)")
_TITLES = {
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "ft", "gen", "gov", "rev", "sgt",
    "capt", "col", "lt", "hon", "vs", "cf", "e.g", "i.e", "al", "approx", "dept", "esp",
}  # fmt: skip
_BEFORE_NUMBERS = {
    "no", "nos", "p", "pp", "vol", "vols", "fig", "figs", "ch", "sec", "art", "para", "op",
    "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
}  # fmt: skip


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence of `text`; together they cover every non-space
    character, and only whitespace lies between two sentences."""
    cuts = sorted(
        {m.end() for m in _SENTENCE_END.finditer(text) if _is_sentence_end(text, m)}
        | {m.start() for m in _LIST_LINE.finditer(text)}
    )
    spans: list[tuple[int, int]] = []
    previous = 0
    for cut in [*cuts, len(text)]:
        segment = text[previous:cut]
        stripped = segment.strip()
        if stripped:
            begin = previous + (len(segment) - len(segment.lstrip()))
            spans.append((begin, begin + len(stripped)))
        previous = cut
    return spans


def _is_sentence_end(text: str, match: re.Match) -> bool:
    rest = text[match.end() :].lstrip()
    if not rest:
        return False
    following = rest[0]
    mark = match.group()
    if not mark.startswith("."):
        return True  # ! ? … and the like
    if following.islower():
        return False  # "e.g. the", "approx. ten"
    word_start = max(text.rfind(" ", 0, match.start()), text.rfind("\n", 0, match.start())) + 1
    word = text[word_start : match.start()].lstrip("(\"'“‘[").lower()
    if word in _TITLES or (word in _BEFORE_NUMBERS and following.isdigit()):
        return False
    # An initial ("J. Smith") or a dotted abbreviation ("U.S. Army") is not an end.
    return not (len(word) == 1 and word.isalpha()) and "." not in word
