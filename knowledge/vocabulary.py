"""The knowledge base's vocabulary as PostgreSQL's full-text search sees it, and the terms of a
question measured against it.

The vocabulary is every lexeme of the generated `search_vector` of the searchable chunks
(enabled documents in status `ready`, not expired) *of the collections a reader may read* (its
scope: `vocabulary_scope`) with its document frequency (how many chunks hold it), read with
`ts_stat`.
A reader's vocabulary therefore holds no word, frequency or spelling correction that only
documents they may not read contain (docs/decisions/0076-statistics-per-reader.md). It is built
once per scope and kept in the process (the last MAX_SCOPES scopes); a cheap fingerprint of the
scope (one round trip: its searchable documents' count, id sum and latest `updated_at`, and the
highest chunk id) is re-read at most every RECHECK_SECONDS and a change triggers a rebuild —
new, re-ingested, deleted, disabled, re-enabled, moved or expiring documents all change it. It is
the scope's whole vocabulary, also when a question is restricted to some documents.
Hybrid retrieval (its lexical side, knowledge/lexical_search.py) weights the question's full-text
terms by these document frequencies on every search, so a process's first search builds it.

A question's terms come from the same parser and the same `english` configuration that built the
chunks' vectors (`ts_debug`), so a term is "known" exactly when the full-text search could match
it. Each term carries what the evidence check needs (chat/answering/evidence_signals.py):

- `known`: the lexeme occurs in the knowledge base (accents folded on both sides: "Maiziere"
  matches "Maizière");
- `near`: for an unknown lexeme of at least 4 characters, a known lexeme one edit away
  (Damerau: insertion, deletion, substitution or transposition), the likely intended word of a
  typo ("srevice" → "servic", "parliment" → "parliament");
- `word_pieces`: how many pieces the embedding model's tokenizer cuts the word into — common
  English words are one piece, names, jargon and misspellings several;
- `capitalized`: written with a capital inside the question (a name), unless the question's
  capitals say nothing (all capitals, or most words capitalised);
- `numeric`: a number (its formatting varies too much to count as evidence either way);
- `idf`: ln((N + 1) / (df + 0.5)) over the N searchable chunks; an unknown term gets the
  largest value, ln((N + 1) / 0.5).

A changed knowledge base is rebuilt in a background thread while the previous vocabulary keeps
answering (`vocabulary_get`). Why, and what building and asking cost:
docs/decisions/0005-vocabulary-and-typos.md.
"""

from __future__ import annotations

import bisect
import functools
import logging
import math
import re
import string
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from django.db import connection

from knowledge import embedding
from knowledge.access import Reader, documents_not_personal_sql

logger = logging.getLogger(__name__)

TYPO_MIN_LENGTH = 4  # shorter lexemes are too easily one edit from an unrelated word
# The work a question's spelling correction may do (docs/decisions/0100-spelling-correction-
# bounded.md): a lexeme is looked up only up to TYPO_MAX_LENGTH characters, only the first
# TYPO_MAX_LOOKUPS unknown lexemes of a question are, and a question is measured on its first
# QUESTION_MAX_TERMS distinct terms.
TYPO_MAX_LENGTH = 24
TYPO_MAX_LOOKUPS = 4
QUESTION_MAX_TERMS = 64
# The tokenizer counts the word pieces of a term's first WORD_PIECES_MAX_CHARS characters only
# (a longer word is several pieces anyway).
WORD_PIECES_MAX_CHARS = 32
# PostgreSQL's parser aliases: compounds are also emitted part by part (the parts are what
# count); numbers of every kind are flagged numeric.
COMPOUND_ALIASES = frozenset({"asciihword", "hword", "numhword"})
NUMERIC_ALIASES = frozenset({"int", "uint", "float", "sfloat", "version", "scientific"})
_EDIT_LETTERS = string.ascii_lowercase + string.digits

# A searchable document: enabled, ready and not expired (knowledge.access's "available"; an
# expired one is withdrawn from the moment it expires, before `purge_expired` deletes it).
# statement_timestamp(), not now(): now() is when the transaction began.
_SEARCHABLE_SQL = (
    "d.enabled AND d.status = 'ready' "
    "AND (d.expires_at IS NULL OR d.expires_at > statement_timestamp())"
)
_FINGERPRINT_SQL = f"""
    SELECT count(*), coalesce(sum(id), 0), max(updated_at), {{chunks}}
    FROM knowledge_document d WHERE {_SEARCHABLE_SQL} {{scope}}
"""
_MAX_CHUNK_SQL = "(SELECT coalesce(max(id), 0) FROM knowledge_chunk)"
# The newest chunk of the scope's documents: each document's newest chunk is one probe of the
# (document, id) index, so the statement reads as many index entries as the scope has
# documents, never every chunk (docs/decisions/0153-postgresql-per-statement.md).
_MAX_CHUNK_IN_SCOPE_SQL = (
    "(SELECT coalesce(max(newest.id), 0) FROM knowledge_document d "
    "CROSS JOIN LATERAL (SELECT c.id FROM knowledge_chunk c WHERE c.document_id = d.id "
    "ORDER BY c.id DESC LIMIT 1) newest WHERE TRUE {scope})"
)
_SEARCHABLE_VECTORS_SQL = (
    "SELECT c.search_vector FROM knowledge_chunk c "
    f"JOIN knowledge_document d ON d.id = c.document_id WHERE {_SEARCHABLE_SQL} {{scope}}"
)

# The collections a vocabulary is built from: None for every collection (a superuser, the
# operator's tools), else the ids of the collections a reader may read.
Scope = frozenset[int] | None


def vocabulary_scope(reader: Reader) -> Scope:
    """The scope of `reader`'s vocabulary: every collection for a superuser, else the
    collections they may read. TypeError for anything but a `Reader`."""
    if not isinstance(reader, Reader):
        raise TypeError(f"reader must be a knowledge.access.Reader, not {type(reader).__name__}")
    return None if reader.is_superuser else frozenset(reader.collection_ids)


def _scope_sql(scope: Scope) -> str:
    """The SQL condition on `d.collection_id` for `scope` (ids are ints: formatted in, since
    ts_stat takes its query as text)."""
    if scope is None:
        return f"AND {documents_not_personal_sql('d')}"  # never personal files (0081)
    ids = ",".join(str(int(pk)) for pk in sorted(scope)) or "NULL"
    return f"AND d.collection_id IN ({ids})"


def fold(text: str) -> str:
    """Lower case without accents ("Maizière" → "maiziere"), for matching lexemes."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def edits1(word: str) -> Iterator[str]:
    """Every string one Damerau edit away from `word` (letters and digits inserted or swapped
    in; deletions and transpositions of its own characters)."""
    letters = set(_EDIT_LETTERS) | set(word)
    for i in range(len(word) + 1):
        head, tail = word[:i], word[i:]
        if tail:
            yield head + tail[1:]  # deletion
            for letter in letters:
                if letter != tail[0]:
                    yield head + letter + tail[1:]  # substitution
        if len(tail) > 1 and tail[0] != tail[1]:
            yield head + tail[1] + tail[0] + tail[2:]  # transposition
        for letter in letters:
            yield head + letter + tail  # insertion


@dataclass(frozen=True)
class Vocabulary:
    """Folded lexeme → number of searchable chunks holding it."""

    fingerprint: tuple
    chunk_count: int
    document_frequency: dict[str, int] = field(repr=False)

    def __len__(self) -> int:
        return len(self.document_frequency)

    def frequency(self, lexeme: str) -> int:
        return self.document_frequency.get(fold(lexeme), 0)

    def knows(self, lexeme: str) -> bool:
        return fold(lexeme) in self.document_frequency

    def idf(self, lexeme: str) -> float:
        """ln((N + 1) / (df + 0.5)); the largest value for an unknown lexeme."""
        return self.idf_of_frequency(self.frequency(lexeme))

    def idf_of_frequency(self, frequency: int) -> float:
        """ln((N + 1) / (frequency + 0.5)) over the N searchable chunks."""
        return math.log((self.chunk_count + 1) / (frequency + 0.5))

    @property
    def max_idf(self) -> float:
        return self.idf_of_frequency(0)

    def nearest(self, lexeme: str) -> str | None:
        """The most frequent known lexeme one Damerau edit from an unknown `lexeme` of
        TYPO_MIN_LENGTH to TYPO_MAX_LENGTH characters; None when there is none (or the lexeme is
        known, shorter or longer). At most about 2·(L + 1)·(36 + L) dictionary lookups for a
        lexeme of L characters."""
        word = fold(lexeme)
        if not TYPO_MIN_LENGTH <= len(word) <= TYPO_MAX_LENGTH or word in self.document_frequency:
            return None
        frequency = self.document_frequency
        candidates = {edit for edit in edits1(word) if edit in frequency}
        if not candidates:
            return None
        return max(candidates, key=lambda known: (frequency[known], known))


@dataclass(frozen=True)
class QuestionTerm:
    lexeme: str  # folded, as the english configuration stems it
    token: str  # the word as written in the question
    known: bool
    near: str | None  # the known lexeme it is probably a typo of (unknown terms only)
    frequency: int  # searchable chunks holding it
    idf: float
    word_pieces: int
    capitalized: bool
    numeric: bool

    @property
    def specific(self) -> bool:
        """Names a particular thing: a capitalised word, or one the tokenizer does not know
        whole (jargon, names, misspellings)."""
        return self.capitalized or self.word_pieces >= 2

    @property
    def typo(self) -> bool:
        """Unknown, not an English word the tokenizer knows whole, and one edit from a known
        lexeme: most likely a misspelling of it."""
        return not self.known and self.near is not None and self.word_pieces >= 2


@dataclass(frozen=True)
class QuestionTerms:
    terms: tuple[QuestionTerm, ...]
    vocabulary_size: int
    chunk_count: int

    @property
    def known(self) -> list[QuestionTerm]:
        return [term for term in self.terms if term.known]

    @property
    def unknown(self) -> list[QuestionTerm]:
        """Terms the knowledge base does not hold, typos of known words excused, numbers left
        out."""
        return [term for term in self.terms if not (term.known or term.typo or term.numeric)]

    @property
    def near_known(self) -> list[QuestionTerm]:
        return [term for term in self.terms if term.typo]

    @property
    def unknown_specific(self) -> list[QuestionTerm]:
        return [term for term in self.unknown if term.specific]

    @property
    def unknown_share(self) -> float:
        """IDF-weighted share of the question's (non-numeric) terms the knowledge base lacks;
        a typo counts with the weight of the word it stands for."""
        counted = [term for term in self.terms if not term.numeric]
        total = sum(term.idf for term in counted)
        if not total:
            return 0.0
        unknown = {term.lexeme for term in self.unknown}
        return sum(term.idf for term in counted if term.lexeme in unknown) / total


# --- The cached vocabulary -------------------------------------------------------------------
RECHECK_SECONDS = 2.0  # how long a process trusts its vocabulary before reading the fingerprint


MAX_SCOPES = 32  # the vocabularies a process keeps (one per distinct set of collections)


@dataclass
class _Cache:
    vocabulary: Vocabulary | None = None
    checked_at: float = 0.0  # time.monotonic() of the last fingerprint read that matched
    rebuilding: bool = False


_lock = threading.Lock()
_caches: OrderedDict[Scope, _Cache] = OrderedDict()


def _cache_of(scope: Scope) -> _Cache:
    """The cache entry of `scope`, made the most recent (the oldest dropped beyond
    MAX_SCOPES)."""
    with _lock:
        entry = _caches.get(scope)
        if entry is None:
            entry = _caches[scope] = _Cache()
        _caches.move_to_end(scope)
        while len(_caches) > MAX_SCOPES:
            _caches.popitem(last=False)
        return entry


def knowledge_base_fingerprint(scope: Scope = None) -> tuple:
    """Changes whenever the searchable chunks of `scope` (default: every collection) may have
    changed (one cheap round trip): a document of the scope added, deleted, disabled,
    enabled, moved or saved, or chunks written to one, and a document expiring (nothing is
    written then: it leaves the count); never for a change outside it."""
    with connection.cursor() as cursor:
        condition = _scope_sql(scope)
        in_scope = _MAX_CHUNK_IN_SCOPE_SQL.format(scope=condition)
        chunks = _MAX_CHUNK_SQL if scope is None else in_scope
        sql = _FINGERPRINT_SQL.format(chunks=chunks, scope=condition)
        cursor.execute(sql)
        count, id_sum, updated, max_chunk = cursor.fetchone()
    return (connection.settings_dict["NAME"], count, id_sum, updated, max_chunk)


def vocabulary_build(fingerprint: tuple | None = None, scope: Scope = None) -> Vocabulary:
    """Read the lexemes and document frequencies of `scope`'s searchable chunks from
    PostgreSQL."""
    fingerprint = fingerprint or knowledge_base_fingerprint(scope)
    condition = _scope_sql(scope)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM knowledge_chunk c JOIN knowledge_document d "
            f"ON d.id = c.document_id WHERE {_SEARCHABLE_SQL} {condition}"
        )
        (chunk_count,) = cursor.fetchone()
        cursor.execute(
            "SELECT word, ndoc FROM ts_stat(%s)", [_SEARCHABLE_VECTORS_SQL.format(scope=condition)]
        )
        rows = cursor.fetchall()
    frequency: dict[str, int] = {}
    for word, ndoc in rows:
        key = word if word.isascii() else fold(word)
        # Two spellings that fold together ("maizière", "maiziere") may share chunks: the sum
        # can overcount, never exceed the chunk count.
        frequency[key] = min(frequency.get(key, 0) + ndoc, chunk_count)
    return Vocabulary(
        fingerprint=fingerprint, chunk_count=chunk_count, document_frequency=frequency
    )


def vocabulary_get(*, reader: Reader, wait: bool = False) -> Vocabulary:
    """The vocabulary of what `reader` may search (`vocabulary_scope`), from the process cache.

    The scope's fingerprint is read at most every RECHECK_SECONDS. When it changed, the first
    caller rebuilds: synchronously if the process has no vocabulary of this scope and database
    yet (or `wait`), otherwise in a background thread while callers keep the previous
    vocabulary — a rebuild reads every lexeme (seconds at 100k chunks) and must not stall
    questions during ingestion. TypeError when `reader` is not a `Reader`.
    """
    scope = vocabulary_scope(reader)
    entry = _cache_of(scope)
    now = time.monotonic()
    database = connection.settings_dict["NAME"]
    cached = entry.vocabulary
    usable = cached is not None and cached.fingerprint[0] == database
    if usable and not wait and now - entry.checked_at < RECHECK_SECONDS:
        return cached
    fingerprint = knowledge_base_fingerprint(scope)
    if usable and cached.fingerprint == fingerprint:
        entry.checked_at = now
        return cached
    if usable and not wait:
        with _lock:
            start = not entry.rebuilding
            entry.rebuilding = True
        if start:
            threading.Thread(
                target=_rebuild_in_background,
                args=(entry, scope),
                name="vocabulary-rebuild",
                daemon=True,
            ).start()
        return cached
    with _lock:
        current = entry.vocabulary
        if current is not None and current.fingerprint == fingerprint:
            return current  # built by another thread while this one waited
        vocabulary = vocabulary_build(fingerprint, scope)
        entry.vocabulary, entry.checked_at = vocabulary, time.monotonic()
        return vocabulary


def _rebuild_in_background(entry: _Cache, scope: Scope) -> None:
    try:
        with _lock:
            vocabulary = vocabulary_build(scope=scope)
            entry.vocabulary, entry.checked_at = vocabulary, time.monotonic()
    except Exception:  # the next question tries again; answering never depends on it
        logger.exception("Rebuilding the knowledge base vocabulary failed")
    finally:
        entry.rebuilding = False
        connection.close()  # this thread's own connection


def vocabulary_recheck() -> None:
    """Read the fingerprints again on the next use instead of trusting the cached
    vocabularies for the rest of RECHECK_SECONDS; each is rebuilt only if its fingerprint
    changed (tests: each test's knowledge base is its own)."""
    with _lock:
        for entry in _caches.values():
            entry.checked_at = 0.0


def vocabulary_forget() -> None:
    """Drop the cached vocabularies (tests; the fingerprint makes it unnecessary otherwise)."""
    with _lock:
        _caches.clear()


def vocabulary_built() -> bool:
    """Whether the process holds a vocabulary of any scope (the server's warm-up built one)."""
    with _lock:
        return any(entry.vocabulary is not None for entry in _caches.values())


# --- Question terms --------------------------------------------------------------------------
@dataclass(frozen=True)
class TextSearchParse:
    """How PostgreSQL's `english` full-text configuration reads a text: its
    `websearch_to_tsquery` (as text) and `ts_debug`'s (alias, token, first lexeme) for each
    token (the lexeme None for stop words and punctuation)."""

    websearch: str
    tokens: tuple[tuple[str, str, str | None], ...]


# A question is parsed for retrieval (its full-text query) and for the evidence check (its
# terms): one round trip serves both, and the same text is not parsed twice in a process. The
# parse depends only on the text and the database's `english` configuration.
_PARSE_SQL = (
    "SELECT websearch_to_tsquery('english', %s)::text, "
    "(SELECT array_agg(ARRAY[alias, token, lexemes[1]] ORDER BY n) "
    "FROM ts_debug('english', %s) WITH ORDINALITY "
    "AS d(alias, description, token, dictionaries, dictionary, lexemes, n))"
)


@functools.lru_cache(maxsize=1024)
def text_search_parse(text: str) -> TextSearchParse:
    """`text` as the full-text search reads it (one round trip; cached per process)."""
    with connection.cursor() as cursor:
        cursor.execute(_PARSE_SQL, [text, text])
        websearch, rows = cursor.fetchone()
    return TextSearchParse(
        websearch=websearch or "",
        tokens=tuple((alias, token, lexeme) for alias, token, lexeme in rows or ()),
    )


# Function words as people type them to a chat: contractions without their apostrophe and
# spoken or texting forms ("dont", "whats", "cos", "pls"). The english configuration drops
# "don't" (its parts are stop words) but keeps "dont", which no document holds, and which the
# tokenizer splits: the evidence check took it for the name of something the documents lack.
# Words that are also ordinary words are left out ("ill", "id", "wed", "well", "lets", "shell").
INFORMAL_FUNCTION_WORDS = frozenset(
    {
        "dont", "doesnt", "didnt", "cant", "couldnt", "wont", "wouldnt", "shouldnt", "isnt",
        "arent", "wasnt", "werent", "hasnt", "havent", "hadnt", "mustnt", "neednt", "aint",
        "im", "ive", "youre", "youve", "youll", "youd", "theyre", "theyve", "theyll", "theyd",
        "weve", "hes", "shes", "thats", "whats", "wheres", "whos", "hows", "whens", "whys",
        "theres", "heres", "itll", "thatll", "couldve", "wouldve", "shouldve", "mightve",
        "cos", "coz", "cuz", "bc", "pls", "plz", "thx", "ty", "u", "ur", "ya", "yeah", "yep",
        "nope", "ok", "okay", "gonna", "wanna", "gotta", "kinda", "sorta", "dunno", "lemme",
    }
)  # fmt: skip


def question_tokens(question: str) -> list[tuple[str, str, str]]:
    """(alias, token, lexeme) for each word of `question` that the english configuration keeps,
    in order (stop words, INFORMAL_FUNCTION_WORDS and punctuation dropped; compounds left to
    their parts)."""
    return [
        (alias, token, lexeme)
        for alias, token, lexeme in text_search_parse(question).tokens
        if lexeme and alias not in COMPOUND_ALIASES and token.lower() not in INFORMAL_FUNCTION_WORDS
    ]


_SENTENCE_FIRST_WORD = re.compile(r"(?:^|[.!?…]\s+)[\"'“‘(\[]*([^\s\"'“‘(\[]+)")


def _capitals_informative(question: str) -> bool:
    """Capitals mark names only in ordinary sentence case: not in all-caps or Title Case."""
    words = [word for word in question.split() if word[:1].isalpha()]
    if len(words) < 2 or not any(char.islower() for char in question):
        return False
    capitalised = sum(word[0].isupper() for word in words[1:])
    return capitalised <= (len(words) - 1) / 2


def sentence_first_words(text: str) -> list[str]:
    """The first word of each sentence of `text` (opening quotes and brackets dropped)."""
    return _SENTENCE_FIRST_WORD.findall(text)


def question_terms(
    question: str, *, reader: Reader, vocabulary: Vocabulary | None = None
) -> QuestionTerms:
    """The question's content terms measured against the vocabulary of what `reader` may
    search (`vocabulary`, when given, must be that one): its first QUESTION_MAX_TERMS distinct
    terms, the first TYPO_MAX_LOOKUPS unknown ones of which are looked up for a spelling
    correction (`Vocabulary.nearest`); later unknown ones get `near=None`."""
    vocabulary = vocabulary or vocabulary_get(reader=reader)
    distinct: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    for alias, token, lexeme in question_tokens(question):
        folded = fold(lexeme).lstrip("-") or fold(lexeme)
        if folded not in seen:
            seen.add(folded)
            distinct.append((alias, token, folded))
            if len(distinct) == QUESTION_MAX_TERMS:
                break
    pieces = _word_pieces([token[:WORD_PIECES_MAX_CHARS] for _, token, _ in distinct])
    # A capital at the start of a sentence says nothing about a name: a token is "leading" when
    # a sentence's first word starts with it (sorted, those words are found by bisection).
    first_words = sorted(set(sentence_first_words(question)))
    capitals = _capitals_informative(question)
    terms: list[QuestionTerm] = []
    lookups = 0
    for (alias, token, folded), word_pieces in zip(distinct, pieces, strict=True):
        known = vocabulary.knows(folded)
        near = None
        if not known and TYPO_MIN_LENGTH <= len(folded) <= TYPO_MAX_LENGTH:
            if lookups < TYPO_MAX_LOOKUPS:
                near = vocabulary.nearest(folded)
            lookups += 1
        at = bisect.bisect_left(first_words, token)
        leading = at < len(first_words) and first_words[at].startswith(token)
        terms.append(
            QuestionTerm(
                lexeme=folded,
                token=token,
                known=known,
                near=near,
                frequency=vocabulary.frequency(folded),
                idf=vocabulary.idf(folded),
                word_pieces=word_pieces,
                capitalized=capitals and not leading and token[:1].isupper(),
                numeric=alias in NUMERIC_ALIASES,
            )
        )
    return QuestionTerms(
        terms=tuple(terms), vocabulary_size=len(vocabulary), chunk_count=vocabulary.chunk_count
    )


def _word_pieces(tokens: Iterable[str]) -> list[int]:
    tokens = list(tokens)
    if not tokens:
        return []
    encoded = embedding.tokenize(tokens, add_special_tokens=False)["input_ids"]
    return [max(1, len(ids)) for ids in encoded]
