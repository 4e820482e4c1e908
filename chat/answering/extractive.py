"""Extractive answering (SPEC §5): no language model, only sentences the documents hold.

From the qualifying chunks (retrieval order, best first) every sentence is a candidate. Each is
scored on two kinds of evidence:

- lexical: the share of the question's content words the sentence holds, each word weighted
  by how rare it is among the candidates (an IDF over the candidate sentences), so a sentence
  holding the question's distinctive words beats one holding only the common topic word;
- semantic: cosine similarity of the sentence's embedding to the question's (embedded in one
  batch; vectors are cached by text, shared with the evidence check);

plus a small prior for the chunk's own similarity, so the top-ranked chunk wins ties. Embedding
a sentence costs about as much as embedding the question, and the answer's first words wait for
it, so only the MAX_COMPARED_SENTENCES candidates best on the cheap part of the score (lexical
share and chunk prior) are embedded and compared. The best sentence is always taken; up to two
more join it when they score close to it and do not repeat what is already said. The best
sentence comes first, so the answer opens with what answers; the others follow in reading order
(chunk by chunk, in the order the chunks were first chosen), each sentence followed by its
chunk's marker `[n]`, numbered in order of first use. Opening with the best sentence instead of
keeping all in reading order: the first sentence holds the gold answer for 79.2% of the
answerable questions of squad2-visible instead of 70.5% (citation accuracy 94.0% either way),
and for 81% instead of 68% of demo/eval/followups.json. Everything is
deterministic: ties break on chunk rank and position.

Every answer sentence is an exact substring of the chunk it cites (`Sentence.text ==
chunk.text[start:end]`).

What a sentence is, not only what it says (issue 13, item 6): on policy pages the sentence
closest to the question is often one that cannot answer it — an FAQ's question line ("Q: How do
I connect to the VPN?"), or the overview's sentence about the document itself ("It is written
for the Customer Success and Finance teams, and for anyone who receives a refund request"),
close to every question on the subject. So a sentence ending in "?" loses WEIGHT_QUESTION_FORM,
a sentence about the document (`_SCOPE_SENTENCE`) loses WEIGHT_SCOPE unless the question asks
whom or what the document covers, and a sentence holding what the question asks for
(chat/answering/answer_types.py: a date for "when", a number for "how many", a duration — a
number with a unit of time — for a named span such as "the refund window" or "the notice
period", a frequency for "how often") gains WEIGHT_ANSWER_TYPE. Measured by replaying the
selection on the qualifying chunks the pipeline kept for every answered question (a harness
with retrieval — then by reciprocal rank fusion — and the evidence check cached;
demo/eval/policies.json 127 questions, ../shared/eval/squad2-visible.json 386), before → after:

                        citation   answer hit   first sentence holds it   sentences/answer
  policies               97.6%       93.7%            80.3% → 84.3%          1.86 → 1.82
                       → 98.4%     → 95.3%
  squad2-visible         97.4%       93.0%            82.4% → 82.9%          2.15 → 2.17
                       → 97.4%     → 93.3%

No question of either set got worse on any of the three figures for any of the 72 weight
combinations tried (type 0-0.1, question form 0-0.2, scope 0-0.1, a heading-form penalty that
changed nothing and was dropped); chosen on half of each set's documents, the weights left the
other half unchanged either way (the questions they fix are few: 7 of policies, 3 of SQuAD).
Requiring followers to hold the asked-for type too (fewer, more precise sentences: 1.79 a
policies answer) changed no figure but cut the second half of compound questions ("Where is the
code printed, and how often must it change?"): not kept. The cost is about 0.5 ms a question
(regular expressions over the ~26 candidates).

Spreadsheet chunks (`chunk.sheet` set) are cut into their rows, one per line, instead of
sentences: a row ("Stocks — Product code: QX-2207 · … · Safety stock: 200") is what an answer
quotes, never half a row or two rows run together. Rows of one sheet read much alike, so a
further row joins the best one only when it also holds every question word the best row
holds (a question naming one product code gets that product's row, a question about a
category the rows of that category). The citation of a quoted row narrows from the chunk's
range to the row(s) quoted (`A4:E6` → `A4:E4`): a chunk's lines are its consecutive rows
(knowledge/chunking.py).

Measured on ../shared/eval/squad2-visible.json (the 400 answerable questions, top 5 chunks,
the pipeline's evidence check; a harness scoring the selection on cached retrieval results,
constants chosen on half of the articles and checked on the other half): the selection cites a
chunk holding the gold answer for all but 5 of the answered questions whose qualifying chunks
hold one (citation accuracy 94.0% against a ceiling of 95.25%). The misses need reading the
sentence, not matching it: other signals tried (IDF over chunks, the previous sentence's words
or vector, question bigrams, a lighter stemmer, length normalisation, expected-answer types for
who/when/how many, a chunk-rank penalty or guarantee, the fused retrieval score as the prior,
MMR or coverage-driven followers, a logistic model over all of them fitted on one half) moved
citation accuracy on neither half. Followers within 70% of the best (75% before) hold the gold
answer more often: answer hit rate 89.0% → 90.25% (halves 89.5 → 91.5 and 88.5 → 89.0), at
2.15 sentences an answer instead of 1.96. Comparing only the 12 best candidates of 26 (median;
up to 37) leaves every best sentence unchanged and both figures equal.
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
from chat.answering.citations import quoted_markers_neutralize
from knowledge import embedding
from knowledge.parsers.spreadsheets import range_parse
from knowledge.retrieval import RetrievedChunk
from knowledge.selectors import sentence_vectors_stored
from knowledge.sentences import (  # the splitting ingestion shares; re-exported here
    WORD,
    answerable_sentences,
    is_answerable,
    row_spans,
    sentence_spans,
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

STOP_WORDS = {
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are",
    "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but",
    "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for",
    "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself",
    "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself",
    "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "now", "of", "off", "on",
    "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same",
    "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too",
    "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which",
    "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours",
    "yourself", "yourselves", "many", "much", "may", "might", "must", "shall", "also", "get",
    "got", "one", "s", "t", "us", "tell", "please", "know", "want", "need",
}  # fmt: skip


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
        """The answer in streamable pieces (a few words each, the marker last); joined they
        are exactly `text`."""
        pieces: list[str] = []
        for index, sentence in enumerate(self.sentences):
            words = quoted_markers_neutralize(sentence.text).split(" ")
            chunks = [
                " ".join(words[i : i + PIECE_WORDS]) for i in range(0, len(words), PIECE_WORDS)
            ]
            for i, piece in enumerate(chunks):
                leading = " " if (index > 0 or i > 0) else ""
                pieces.append(leading + piece)
            pieces.append(f" [{sentence.n}]")
        return pieces


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
    """Answerable sentences of the chunks (rows of a spreadsheet chunk): not headings or
    table rows, at least three words, each distinct text once (overlapping chunks repeat
    sentences: the better chunk keeps it)."""
    seen: set[str] = set()
    candidates: list[Sentence] = []
    for rank, chunk in enumerate(chunks[:MAX_CANDIDATE_CHUNKS]):
        spans = row_spans(chunk.text) if chunk.sheet else sentence_spans(chunk.text)
        for position, (start, end) in enumerate(spans):
            sentence = Sentence(chunk=chunk, rank=rank, position=position, start=start, end=end)
            text = sentence.text
            if not is_answerable(text):
                continue
            key = " ".join(text.lower().split())
            if key in seen:
                continue
            seen.add(key)
            candidates.append(sentence)
    return candidates


# --- Evidence ------------------------------------------------------------------------------------
def terms(text: str) -> list[str]:
    """Content words, lower-cased and lightly stemmed (plurals, -ing, -ed)."""
    found = []
    for word in WORD.findall(text.lower()):
        word = re.sub(r"['’]s$", "", word)
        if word in STOP_WORDS or (len(word) < 2 and not word.isdigit()):
            continue
        found.append(_stem(word))
    return found


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


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
) -> ExtractiveAnswer:
    """At most three sentences of `chunks` (the qualifying chunks, best first) that best answer
    `question`, each with the citation number of its chunk. `focus`, when given, is the text
    whose words the lexical part of the score looks for instead of the question's: a follow-up
    searched in context ("days annual leave ten years") is answered by the sentence holding its
    own words ("And after ten years?"), not the one that answered the previous question.

    CPU-bound (embeds the candidate sentences): async callers run it in a worker thread.
    """
    candidates = candidate_sentences(chunks)
    if not candidates:
        # Chunks too short to hold a full sentence: the top chunk's text is the answer.
        top = chunks[0]
        start, end = span_trim(top.text, 0, len(top.text))
        candidates = [Sentence(chunk=top, rank=0, position=0, start=start, end=end)]
    prior = _prior_scores(focus or question, candidates, expected_answer(question))
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
