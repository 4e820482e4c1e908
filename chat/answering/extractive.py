"""Extractive answering (`docs/product.md §5`): no language model, only sentences the
documents hold.

`extractive_answer` takes the qualifying chunks (retrieval order, best first) and returns at
most `MAX_SENTENCES` of their sentences, verbatim, each followed by its chunk's marker `[n]`,
numbered in order of first use. Every candidate sentence (`candidate_sentences`; the rows of a
spreadsheet chunk, one per line) is scored on:

- lexical: the share of the question's content words (chat/answering/terms.py) the sentence
  holds, each weighted by its rarity among the candidates (`lexical_scores`);
- semantic: cosine similarity of the sentence's embedding to the question's, for the
  `MAX_COMPARED_SENTENCES` candidates best on the rest of the score (vectors from
  `sentence_vectors`, cached by text and shared with the evidence check);
- a small prior for the chunk's own similarity, so the top-ranked chunk wins ties;
- its form and content: a sentence ending in "?" or about the document itself loses weight, a
  sentence holding what the question asks for (chat/answering/answer_types.py) gains some;
- for a follow-up read in context, its place after the previous answer: a sentence that comes
  right after one that answer gave (`follows_said`) gains `follows_bonus`
  (chat/answering/followups.py `FOLLOWS_SAID_BONUS`).

The best sentence is always taken and comes first; up to two more join it when they score
within `FOLLOWER_RELATIVE_SCORE` of it and do not repeat what is already said, in reading
order after it. A further spreadsheet row joins the best one only when it also holds every
question word the best row holds, and a quoted row's citation narrows from the chunk's range
to the row(s) quoted (`cited_rows`: `A4:E6` → `A4:E4`). Deterministic: ties break on chunk
rank and position. Every answer sentence is an exact substring of the chunk it cites
(`Sentence.text == chunk.text[start:end]`).

Why these scores, weights and this order, with their measurements and what was tried instead:
`docs/decisions/0022-extractive-sentence-selection.md`,
`docs/decisions/0023-extractive-sentence-order.md`,
`docs/decisions/0024-extractive-sentence-form-and-answer-type.md`,
`docs/decisions/0031-follow-ups-by-kind.md` (the place after the previous answer).
"""

from __future__ import annotations

import math
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from chat.answering.answer_types import answer_matches, expected_answer
from chat.answering.terms import terms
from chat.citations import quoted_markers_neutralize
from knowledge import embedding
from knowledge.parsers.spreadsheets import range_parse
from knowledge.retrieval import RetrievedChunk
from knowledge.selectors import sentence_vectors_stored
from knowledge.sentences import (  # the splitting ingestion shares
    answerable_positions,
    answerable_sentences,
    span_trim,
    text_hash,
)

MAX_SENTENCES = 3
MAX_CANDIDATE_CHUNKS = 8
# Candidates embedded and compared with the question, the best on lexical share + chunk prior.
MAX_COMPARED_SENTENCES = 12
WEIGHT_SEMANTIC = 0.55
WEIGHT_LEXICAL = 0.35
WEIGHT_CHUNK = 0.10
# Added to a sentence holding what the question asks for (chat/answering/answer_types.py).
WEIGHT_ANSWER_TYPE = 0.06
# Taken from a sentence that cannot answer by its form: a question (an FAQ's "Q: ...?")...
WEIGHT_QUESTION_FORM = 0.2
# ...or a sentence about the document itself ("It is written for the Finance team", "This
# policy tells staff how...") when the question is not about whom or what the document covers.
WEIGHT_SCOPE = 0.05
_SCOPE_SENTENCE = re.compile(
    r"\b(this|the) (policy|document|handbook|guide|guidance|procedure|page|faq|section|"
    r"chapter|article|manual|note|notice|statement)\b( (tells|explains|describes|sets out|"
    r"covers|applies|is for|is written|is intended|is meant|outlines|summarises|summarizes))|"
    r"\b(is|are) (written|intended|meant|aimed) (for|at)\b|\bapplies to (all|every|anyone)\b",
    re.I,
)
_SCOPE_QUESTION = re.compile(
    r"\b(who|whom|audience|apply|applies|cover|covers|scope|purpose|intended|written|version|"
    r"effective)\b",
    re.I,
)
# A further sentence joins the best one when its score is at least this share of the best...
FOLLOWER_RELATIVE_SCORE = 0.7
# ...and it says something new: semantic similarity to every chosen sentence below this.
REDUNDANT_SIMILARITY = 0.9
PIECE_WORDS = 6
_NON_SPACE = re.compile(r"\S+")
_SPACE_RUN = re.compile(r"[ \t]{2,}|\t")


@dataclass(frozen=True)
class Sentence:
    chunk: RetrievedChunk
    rank: int  # the chunk's place among the qualifying chunks (0 = best)
    position: int  # the sentence's place in its chunk
    start: int
    end: int

    @property
    def text(self) -> str:
        return self.chunk.text[self.start : self.end]


@dataclass(frozen=True)
class AnswerSentence:
    text: str
    n: int
    chunk: RetrievedChunk
    score: float


@dataclass(frozen=True)
class ExtractiveAnswer:
    sentences: list[AnswerSentence]

    @property
    def cited_chunks(self) -> list[tuple[int, RetrievedChunk]]:
        """(n, chunk) for every cited chunk, by n."""
        seen: dict[int, RetrievedChunk] = {}
        for sentence in self.sentences:
            seen.setdefault(sentence.n, sentence.chunk)
        return sorted(seen.items())

    @property
    def text(self) -> str:
        return "".join(self.pieces())

    def pieces(self) -> list[str]:
        """The answer in streamable pieces (PIECE_WORDS words each, the whitespace before a
        piece's first word leading it, the marker last); joined they are exactly `text`. A
        sentence's runs of spaces and tabs are one space (`sentence_spaces_collapse`)."""
        pieces: list[str] = []
        for index, sentence in enumerate(self.sentences):
            text = sentence_spaces_collapse(quoted_markers_neutralize(sentence.text))
            ends = [word.end() for word in _NON_SPACE.finditer(text)][
                PIECE_WORDS - 1 :: PIECE_WORDS
            ]
            cuts = [0, *(end for end in ends if end < len(text)), len(text)]
            for i in range(len(cuts) - 1):
                leading = " " if (index > 0 and i == 0) else ""
                pieces.append(leading + text[cuts[i] : cuts[i + 1]])
            pieces.append(f" [{sentence.n}]")
        return pieces


def sentence_spaces_collapse(text: str) -> str:
    """`text` with each run of spaces and tabs made one space: in a sentence quoted by an
    extractive answer (shown among other sentences, not as a block of code) they carry no
    meaning (docs/decisions/0101-linear-text-regexes.md)."""
    return _SPACE_RUN.sub(" ", text)


def cited_rows(chunk: RetrievedChunk, starts: Sequence[int]) -> str | None:
    """The range of the rows of a spreadsheet chunk that begin at or hold the offsets
    `starts` (line i is the chunk's (first row + i)-th row); the chunk's range when its
    lines and rows do not line up."""
    parsed = range_parse(chunk.cells)
    if parsed is None or not starts:
        return chunk.cells
    rows = parsed.rows()
    if chunk.text.count("\n") + 1 != len(rows):
        return chunk.cells
    lines = sorted({chunk.text.count("\n", 0, start) for start in starts})
    return str(parsed.with_rows(rows[lines[0]], rows[lines[-1]]))


def candidate_sentences(chunks: Sequence[RetrievedChunk]) -> list[Sentence]:
    """Answerable sentences of the chunks (rows of a spreadsheet chunk): not headings (a
    numbered heading's own paragraph either, `is_heading_paragraph`), table rows, page numbers
    or captions, at least three words, each distinct text once (overlapping chunks repeat
    sentences: the better chunk keeps it)."""
    seen: set[str] = set()
    candidates: list[Sentence] = []
    for rank, chunk in enumerate(chunks[:MAX_CANDIDATE_CHUNKS]):
        for position, start, end in answerable_positions(chunk.text, sheet=bool(chunk.sheet)):
            sentence = Sentence(chunk=chunk, rank=rank, position=position, start=start, end=end)
            text = sentence.text
            key = " ".join(text.lower().split())
            if key in seen:
                continue
            seen.add(key)
            candidates.append(sentence)
    return candidates


# --- Evidence ------------------------------------------------------------------------------------
def lexical_scores(question: str, sentences: Sequence[str]) -> list[float]:
    """Weighted share of the question's terms each sentence holds (0..1)."""
    question_terms = set(terms(question))
    if not question_terms or not sentences:
        return [0.0] * len(sentences)
    sentence_terms = [set(terms(text)) for text in sentences]
    count = len(sentences)
    weight = {
        term: math.log(1.0 + (count + 1) / (0.5 + sum(term in s for s in sentence_terms)))
        for term in question_terms
    }
    total = sum(weight.values())
    return [sum(weight[t] for t in question_terms & s) / total for s in sentence_terms]


_cache_lock = threading.Lock()
_vector_cache: OrderedDict[str, np.ndarray] = OrderedDict()
VECTOR_CACHE_SIZE = 20_000


def sentence_vectors(texts: Sequence[str]) -> np.ndarray:
    """Unit vectors of the texts, one row per text. Vectors come from the cache (filled by
    `sentence_vectors_preload` with the vectors stored at ingestion, and by earlier calls);
    only the texts missing from it are embedded, in one batch. No database access: callers run
    it in worker threads."""
    keys = [text_hash(text) for text in texts]
    with _cache_lock:
        cached = {key: _vector_cache[key] for key in keys if key in _vector_cache}
    missing = list(dict.fromkeys(key for key in keys if key not in cached))
    if missing:
        first_text = dict(zip(keys, texts, strict=True))
        vectors = embedding.embed_texts([first_text[key] for key in missing])
        _cache_put(dict(zip(missing, vectors, strict=True)))
        cached.update(zip(missing, vectors, strict=True))
    if not keys:
        return np.zeros((0, embedding.DIMENSIONS), dtype=np.float32)
    return np.stack([cached[key] for key in keys])


def sentence_vectors_preload(chunks: Sequence[RetrievedChunk]) -> int:
    """Put the stored vectors (computed at ingestion) of the candidate sentences of `chunks`
    into the cache, so that the evidence check and the answer embed none of them. Reads the
    database (one query): call it where the database is used, before the CPU work. Returns
    how many vectors were read."""
    wanted: set[str] = set()
    for chunk in chunks[:MAX_CANDIDATE_CHUNKS]:
        wanted.update(
            text_hash(t) for t in answerable_sentences(chunk.text, sheet=bool(chunk.sheet))
        )
    with _cache_lock:
        wanted.difference_update(_vector_cache)
    if not wanted:
        return 0
    stored = sentence_vectors_stored(text_hashes=wanted)
    _cache_put(stored)
    return len(stored)


def _cache_put(vectors: dict[str, np.ndarray]) -> None:
    with _cache_lock:
        for key, vector in vectors.items():
            _vector_cache[key] = vector
            _vector_cache.move_to_end(key)
        while len(_vector_cache) > VECTOR_CACHE_SIZE:
            _vector_cache.popitem(last=False)


# --- Selection -----------------------------------------------------------------------------------
# How far after a sentence already said a sentence still follows it: the next two of its chunk,
# or the first two of the document's next chunk.
FOLLOWING_SENTENCES = 2


def follows_said(candidates: Sequence[Sentence], said: str) -> list[int]:
    """Indexes of the candidates that come right after a candidate whose text `said` holds
    (within FOLLOWING_SENTENCES of it, in its chunk or at the start of the document's next
    chunk) and are not themselves in `said`."""
    said_text = " ".join(said.split())
    was_said = [" ".join(c.text.split()) in said_text for c in candidates]
    anchors = [c for c, was in zip(candidates, was_said, strict=True) if was]
    found = []
    for i, candidate in enumerate(candidates):
        if was_said[i]:
            continue
        chunk = candidate.chunk
        for anchor in anchors:
            if anchor.chunk.document_id != chunk.document_id:
                continue
            same = anchor.chunk.chunk_index == chunk.chunk_index
            if (same and 0 < candidate.position - anchor.position <= FOLLOWING_SENTENCES) or (
                chunk.chunk_index == anchor.chunk.chunk_index + 1
                and candidate.position < FOLLOWING_SENTENCES
            ):
                found.append(i)
                break
    return found


def _prior_scores(question: str, candidates: Sequence[Sentence], kind: str = "") -> list[float]:
    """The part of each candidate's score that needs no embedding: lexical share (IDF over all
    the candidates), the chunk's similarity and, when the question asks for a kind of thing
    (`kind`, an `expected_answer`), whether the sentence holds one."""
    lexical = lexical_scores(question, [candidate.text for candidate in candidates])
    scope_question = bool(_SCOPE_QUESTION.search(question))
    return [
        WEIGHT_LEXICAL * lexical[i]
        + WEIGHT_CHUNK * float(candidate.chunk.similarity or 0.0)
        + (WEIGHT_ANSWER_TYPE if kind and answer_matches(kind, candidate.text) else 0.0)
        - _form_penalty(candidate, scope_question=scope_question)
        for i, candidate in enumerate(candidates)
    ]


def _form_penalty(sentence: Sentence, *, scope_question: bool) -> float:
    """What the sentence's form takes from its score (see WEIGHT_QUESTION_FORM)."""
    if sentence.chunk.sheet:
        return 0.0
    text = sentence.text.rstrip()
    if text.endswith("?"):
        return WEIGHT_QUESTION_FORM
    if not scope_question and _SCOPE_SENTENCE.search(text):
        return WEIGHT_SCOPE
    return 0.0


def _compared(prior: Sequence[float], candidates: Sequence[Sentence]) -> list[int]:
    """Indexes of the candidates worth embedding: the MAX_COMPARED_SENTENCES best on the prior
    score, in their original order."""
    best = sorted(
        range(len(candidates)),
        key=lambda i: (-round(prior[i], 9), candidates[i].rank, candidates[i].position),
    )[:MAX_COMPARED_SENTENCES]
    return sorted(best)


def extractive_answer(
    *,
    question: str,
    question_vector: np.ndarray,
    chunks: Sequence[RetrievedChunk],
    focus: str | None = None,
    said: str = "",
    follows_bonus: float = 0.0,
) -> ExtractiveAnswer:
    """At most three sentences of `chunks` (the qualifying chunks, best first) that best answer
    `question`, each with the citation number of its chunk. `focus`, when given, is the text
    whose words the lexical part of the score looks for instead of the question's: a follow-up
    searched in context ("days annual leave ten years") is answered by the sentence holding its
    own words ("And after ten years?"), not the one that answered the previous question.
    `said`, when given, is the previous answer of the conversation: a sentence that comes right
    after one of its sentences (`follows_said`) gets `follows_bonus` added to its score.

    CPU-bound (embeds the candidate sentences): async callers run it in a worker thread.
    """
    candidates = candidate_sentences(chunks)
    if not candidates:
        # Chunks too short to hold a full sentence: the top chunk's text is the answer.
        top = chunks[0]
        start, end = span_trim(top.text, 0, len(top.text))
        candidates = [Sentence(chunk=top, rank=0, position=0, start=start, end=end)]
    prior = _prior_scores(focus or question, candidates, expected_answer(question))
    if said and follows_bonus:
        for i in follows_said(candidates, said):
            prior[i] += follows_bonus
    compared = _compared(prior, candidates)
    candidates = [candidates[i] for i in compared]
    texts = [sentence.text for sentence in candidates]
    vectors = sentence_vectors(texts)
    query = np.asarray(question_vector, dtype=np.float32)
    query = query / (np.linalg.norm(query) or 1.0)
    semantic = vectors @ query
    scores = [WEIGHT_SEMANTIC * float(semantic[k]) + prior[i] for k, i in enumerate(compared)]
    order = sorted(
        range(len(candidates)),
        key=lambda i: (-round(scores[i], 9), candidates[i].rank, candidates[i].position),
    )

    chosen = [order[0]]
    best = scores[order[0]]
    # A row follows a best row only holding every question word the best row holds.
    question_terms = set(terms(question))
    best_row_terms = (
        question_terms & set(terms(texts[order[0]])) if candidates[order[0]].chunk.sheet else None
    )
    for i in order[1:]:
        if len(chosen) == MAX_SENTENCES or scores[i] < best * FOLLOWER_RELATIVE_SCORE:
            break
        if any(float(vectors[i] @ vectors[j]) >= REDUNDANT_SIMILARITY for j in chosen):
            continue
        other_row = best_row_terms is not None and candidates[i].chunk.sheet
        if other_row and not best_row_terms <= set(terms(texts[i])):
            continue
        chosen.append(i)

    # The best sentence first; the others in reading order: chunks in the order they were first
    # chosen, sentences in text order.
    chunk_order: dict[int, int] = {}
    for i in chosen:
        chunk_order.setdefault(candidates[i].chunk.chunk_id, len(chunk_order))
    chosen[1:] = sorted(
        chosen[1:], key=lambda i: (chunk_order[candidates[i].chunk.chunk_id], candidates[i].start)
    )
    # A spreadsheet chunk is cited by the rows quoted from it.
    quoted: dict[int, list[int]] = {}
    for i in chosen:
        quoted.setdefault(candidates[i].chunk.chunk_id, []).append(candidates[i].start)
    narrowed: dict[int, RetrievedChunk] = {}
    numbers: dict[int, int] = {}
    sentences = []
    for i in chosen:
        chunk = candidates[i].chunk
        if chunk.sheet:
            if chunk.chunk_id not in narrowed:
                cells = cited_rows(chunk, quoted[chunk.chunk_id])
                narrowed[chunk.chunk_id] = replace(chunk, cells=cells)
            chunk = narrowed[chunk.chunk_id]
        n = numbers.setdefault(chunk.chunk_id, len(numbers) + 1)
        sentences.append(AnswerSentence(text=texts[i], n=n, chunk=chunk, score=scores[i]))
    return ExtractiveAnswer(sentences=sentences)
