"""Cut a parsed document into chunks the embedding model reads whole.

Rules, in order of strength:
1. A chunk never holds more than `MAX_TOKENS` word pieces of the model's own tokenizer,
   special tokens included: the model never silently truncates a chunk.
2. A chunk never crosses a page or a section boundary (consecutive blocks with the same
   page and section form a group; chunks are cut inside groups only). Spreadsheet rows
   (blocks with a `sheet`) group by sheet, and an empty row ends a group: the rows of a
   chunk are consecutive, one per line, and the chunk's `cells` is the range they cover
   together ("A4:E6"), so line i of a spreadsheet chunk is row `first row + i`.
3. Sentences stay whole; only a sentence that alone exceeds the limit is cut, on word
   boundaries (a line break preferred), by counting tokens. Sentences are those the
   answerer quotes (knowledge/sentences.py, `sentence_spans_covering`): one splitter.
4. Paragraphs stay whole when they fit; short neighbouring paragraphs are merged up to
   `TARGET_TOKENS`; a chunk ends at a paragraph boundary whenever it can.
5. Where a chunk boundary falls inside a paragraph (a paragraph too long for one chunk), the
   next chunk starts with the previous chunk's last sentence when that is short and fits.
   At paragraph boundaries there is no overlap: a paragraph is its own unit of meaning.

What the model embeds for a chunk is `embedding_input(text, section)`: the chunk's heading
path, a blank line, then its text, so a chunk under "Handbook > Leave > Annual leave" is
found by questions about annual leave even when its text never names it. Limits are measured
on that input, so the model reads all of it.

Why these sizes (TARGET_TOKENS, OVERLAP_MAX_TOKENS, CONTEXT_MAX_TOKENS), the overlap rule and
the heading path, with the figures: docs/decisions/0003-chunk-size-and-heading-context.md.
Changing them (or anything that cuts documents differently) means bumping CHUNKER_VERSION.

Token counts are computed once per sentence in one batched tokenizer call. BERT's word-piece
tokenizer splits on whitespace first, so a run of sentences joined by whitespace has exactly
the sum of their pieces; every finished chunk is counted again (one more batched call) and
anything over the limit is cut again, so rule 1 holds even where that sum is off.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import groupby

from knowledge import embedding
from knowledge.parsers import SECTION_SEPARATOR, Block, ParsedDocument
from knowledge.parsers.cells import range_rows, range_union
from knowledge.sentences import sentence_spans_covering, text_hash

# Bump whenever a change here cuts documents differently: a document records the version it
# was cut with (Document.chunker_version); `manage.py reindex --stale` re-chunks the others,
# and re-ingesting an unchanged file re-chunks it too.
CHUNKER_VERSION = 4  # 4: PDF heading lines their own paragraphs, page numbers out (0030)
MAX_TOKENS = embedding.MAX_TOKENS  # 256, [CLS] and [SEP] included
TARGET_TOKENS = 120  # merge paragraphs up to this; a single paragraph may use the full limit
OVERLAP_MAX_TOKENS = 48  # longest sentence repeated at the head of the next chunk
SPECIAL_TOKENS = 2  # [CLS] ... [SEP]
CONTEXT_MAX_TOKENS = 48  # longest heading path put in front of a chunk for the model


@dataclass(frozen=True)
class ChunkDraft:
    index: int
    text: str
    page: int | None
    section: str | None
    char_start: int
    char_end: int
    token_count: int  # pieces the model sees (heading path + text + special tokens)
    text_hash: str
    sheet: str | None = None  # spreadsheets: the sheet of the chunk's rows
    cells: str | None = None  # spreadsheets: the range its rows cover, "A4:E6"
    ocr_confidence: float | None = None  # read by OCR: its blocks' mean confidence, 0-100

    @property
    def embedding_input(self) -> str:
        return embedding_input(text=self.text, section=self.section)


@dataclass(frozen=True)
class _Unit:
    """A sentence (or a piece of an over-long one): offsets into the document text and its
    word pieces without the special tokens."""

    start: int
    end: int
    tokens: int
    paragraph: int  # which block it belongs to


def embedding_input(*, text: str, section: str | None) -> str:
    """What the model embeds for a chunk: its heading path, a blank line, its text."""
    context = section_context(section)
    return f"{context}\n\n{text}" if context else text


def section_context(section: str | None) -> str:
    """The heading path as context for the model, at most `CONTEXT_MAX_TOKENS` pieces: the
    outermost headings are dropped first, the innermost one is cut only as a last resort."""
    return _contexts([section])[section][0]


_context_cache: dict[str, tuple[str, int]] = {}


def _contexts(sections: Iterable[str | None]) -> dict[str | None, tuple[str, int]]:
    """(context, its word pieces without special tokens) per section, measured in one
    batched tokenizer call for the sections not seen before."""
    found: dict[str | None, tuple[str, int]] = {}
    todo: list[str] = []
    for section in set(sections):
        cached = _context_cache.get(section) if section else ("", 0)
        if cached is None:
            todo.append(section)
        else:
            found[section] = cached
    if not todo:
        return found
    candidates = [
        (section, SECTION_SEPARATOR.join(parts[i:]))
        for section in todo
        for parts in [section.split(SECTION_SEPARATOR)]
        for i in range(len(parts))
    ]
    counts = embedding.token_counts([candidate for _, candidate in candidates])
    for (section, candidate), count in zip(candidates, counts, strict=True):
        if section not in found and count - SPECIAL_TOKENS <= CONTEXT_MAX_TOKENS:
            found[section] = (candidate, count - SPECIAL_TOKENS)
    for section in todo:
        if section not in found:  # even the innermost heading is too long: cut it
            innermost = section.split(SECTION_SEPARATOR)[-1]
            cut, _ = embedding.truncate_to_limit(innermost, CONTEXT_MAX_TOKENS + SPECIAL_TOKENS)
            found[section] = (cut, embedding.token_count(cut) - SPECIAL_TOKENS)
    if len(_context_cache) > 10_000:
        _context_cache.clear()
    _context_cache.update((section, found[section]) for section in todo)
    return found


def chunks_build(
    *,
    parsed: ParsedDocument,
    max_tokens: int = MAX_TOKENS,
    target_tokens: int = TARGET_TOKENS,
    overlap_tokens: int = OVERLAP_MAX_TOKENS,
) -> list[ChunkDraft]:
    """The chunks of `parsed`, in document order; each one's embedding input (heading path
    and text) is within `max_tokens`."""
    text = parsed.text
    context = {
        section: tokens
        for section, (_, tokens) in _contexts(b.section for b in parsed.blocks).items()
    }

    def limits(section: str | None) -> tuple[int, int]:
        """(target, maximum) word pieces of chunk text under this section."""
        body_max = max_tokens - SPECIAL_TOKENS - context[section]
        return min(target_tokens - SPECIAL_TOKENS, body_max), body_max

    spans_per_block = [
        [
            (block.char_start + s, block.char_start + e)
            for s, e in sentence_spans_covering(block.text)
        ]
        for block in parsed.blocks
    ]
    flat = [span for spans in spans_per_block for span in spans]
    counts = embedding.token_counts([text[s:e] for s, e in flat])
    body_counts = iter(count - SPECIAL_TOKENS for count in counts)

    paragraphs: list[tuple[Block, list[_Unit]]] = []
    for number, (block, spans) in enumerate(zip(parsed.blocks, spans_per_block, strict=True)):
        body_max = limits(block.section)[1]
        units: list[_Unit] = []
        for start, end in spans:
            tokens = next(body_counts)
            if tokens <= body_max:
                units.append(_Unit(start, end, tokens, number))
            else:
                units.extend(_split_long(text, start, end, body_max, number))
        if units:
            paragraphs.append((block, units))

    pieces: list[tuple[Block, list[_Unit]]] = []
    keyed = zip(_group_keys([block for block, _ in paragraphs]), paragraphs, strict=True)
    for (_, section, _, _), keyed_group in groupby(keyed, key=lambda pair: pair[0]):
        group = [paragraph for _, paragraph in keyed_group]
        target_body, body_max = limits(section)
        packed = _pack([units for _, units in group], target_body, body_max)
        for units in _overlap(packed, overlap_tokens, body_max):
            pieces.append((group[0][0], units))

    return _finish(text, pieces, max_tokens, parsed.blocks)


def _group_keys(blocks: Sequence[Block]) -> list[tuple]:
    """(page, section, sheet, region) per block: chunks are cut inside runs of equal keys.
    A spreadsheet row that does not follow the previous one (an empty row between them)
    starts a new region."""
    keys: list[tuple] = []
    region, last_row = 0, None
    for block in blocks:
        rows = range_rows(block.cells) if block.sheet else None
        if rows is not None:
            if last_row is not None and rows.start != last_row + 1:
                region += 1
            last_row = rows[-1]
        else:
            last_row = None
        keys.append((block.page, block.section, block.sheet, region))
    return keys


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
    """Where a paragraph was cut in two, start the second chunk with the first one's last
    sentence when that sentence is short and fits."""
    result: list[list[_Unit]] = []
    for position, units in enumerate(chunks):
        if position:
            previous = chunks[position - 1]
            tail = previous[-1]
            size = sum(unit.tokens for unit in units)
            if (
                tail.paragraph == units[0].paragraph
                and len(previous) > 1
                and tail.tokens <= overlap_tokens
                and size + tail.tokens <= body_max
            ):
                units = [tail, *units]
        result.append(units)
    return result


def _finish(
    text: str,
    pieces: list[tuple[Block, list[_Unit]]],
    max_tokens: int,
    blocks: Sequence[Block] = (),
) -> list[ChunkDraft]:
    """Drafts from packed units; each chunk is counted again and cut again if over the limit."""
    spans = [(block, units[0].start, units[-1].end) for block, units in pieces]
    counts = embedding.token_counts(
        [
            embedding_input(text=text[start:end], section=block.section)
            for block, start, end in spans
        ]
    )
    drafts: list[ChunkDraft] = []
    for (block, start, end), count, (_, units) in zip(spans, counts, pieces, strict=True):
        cells = None
        if block.sheet and blocks:
            cells = range_union(blocks[unit.paragraph].cells for unit in units)
        ocr_confidence = _ocr_confidence(
            [blocks[unit.paragraph] for unit in units] if blocks else []
        )
        fitted = _fit(text, start, end, count, max_tokens, block.section)
        for piece_start, piece_end, piece_count in fitted:
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
                    sheet=block.sheet,
                    cells=cells,
                    ocr_confidence=ocr_confidence,
                )
            )
    return drafts


def _ocr_confidence(blocks: Sequence[Block]) -> float | None:
    """The mean OCR confidence of a chunk's blocks, weighted by their length (None when no
    block was read by OCR)."""
    read = [block for block in dict.fromkeys(blocks) if block.ocr_confidence is not None]
    if not read:
        return None
    weight = sum(len(block.text) for block in read) or 1
    return round(sum(block.ocr_confidence * len(block.text) for block in read) / weight, 1)


def _fit(
    text: str, start: int, end: int, count: int, max_tokens: int, section: str | None
) -> list[tuple[int, int, int]]:
    if count <= max_tokens:
        return [(start, end, count)]
    # Rarely reached (a word cut in the middle re-tokenises differently): cut by tokens with
    # a margin, count again, repeat until everything fits.
    body_max = max_tokens - SPECIAL_TOKENS - _contexts([section])[section][1]
    for margin in (4, 16, 64):
        units = _split_long(text, start, end, body_max - margin, 0)
        counts = embedding.token_counts(
            [embedding_input(text=text[u.start : u.end], section=section) for u in units]
        )
        if all(c <= max_tokens for c in counts):
            return [(u.start, u.end, c) for u, c in zip(units, counts, strict=True)]
    raise ValueError(f"Could not cut text at {start}:{end} into pieces of {max_tokens} tokens.")


def _split_long(text: str, start: int, end: int, body_max: int, paragraph: int) -> list[_Unit]:
    """Cut text[start:end] into pieces of at most `body_max` word pieces, at word starts
    (a line start preferred), in the middle of a word only when one word is that long."""
    piece = text[start:end]
    offsets = embedding.tokenize(piece, add_special_tokens=False, return_offsets_mapping=True)[
        "offset_mapping"
    ]
    units: list[_Unit] = []
    i, total = 0, len(offsets)
    while i < total:
        j = min(i + body_max, total)
        if j < total:
            j = _cut_point(piece, offsets, i, j)
        units.append(_Unit(start + offsets[i][0], start + offsets[j - 1][1], j - i, paragraph))
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
