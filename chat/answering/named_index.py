"""The names of the searchable documents, indexed by word and collection and kept in the
process, so that finding the document a question names (chat/answering/named_documents.py)
looks only at the documents a run of the question's words singles out, never at every title,
nor at every document whose name shares a word with the question
(docs/decisions/0150-answer-cost-per-question.md).

The index holds every available document (enabled, ready, not expired; personal files too) with
its names, collection and whether that is the hidden personal collection. It never decides who
may read what: each question keeps only the documents its `Reader` searches
(`knowledge.access.available_collection_searched` for a collection's documents and
`available_document_searched` for one, the rule asked per request), and counts the words'
frequencies among those alone (the posting lists of the reader's collections). It is rebuilt
when the documents change: a fingerprint of the available documents (their count, id sum and
latest `updated_at`: one statement) is read again at most every
`knowledge.vocabulary.RECHECK_SECONDS`, as the vocabulary's is. One index per process, of one
entry per available document (bounded by the library, not by the questions or the readers).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from django.db import connection

from knowledge import vocabulary
from knowledge.access import Reader, available_collection_searched, available_document_searched
from knowledge.personal import personal_file_label

# The available documents (knowledge.access's "available"), with their names' parts.
_AVAILABLE_SQL = (
    "d.enabled AND d.status = 'ready' "
    "AND (d.expires_at IS NULL OR d.expires_at > statement_timestamp())"
)
_FINGERPRINT_SQL = (
    "SELECT count(*), coalesce(sum(d.id), 0), max(d.updated_at) FROM knowledge_document d "
    f"WHERE {_AVAILABLE_SQL}"
)
_ROWS_SQL = (
    "SELECT d.id, d.title, d.source, d.metadata ->> 'original_name', d.owner_id, "
    "d.collection_id, c.is_personal FROM knowledge_document d "
    f"JOIN knowledge_collection c ON c.id = d.collection_id WHERE {_AVAILABLE_SQL}"
)


@dataclass(frozen=True)
class IndexedDocument:
    """An available document: its names (title, file name without extension), the title the
    asker sees, the folded words of its names, and where it is filed."""

    id: int
    title: str
    names: tuple[str, ...]
    vocabulary: frozenset[str]
    collection_id: int
    in_personal_collection: bool

    def searched_by(self, reader: Reader) -> bool:
        return available_document_searched(
            reader,
            document_id=self.id,
            collection_id=self.collection_id,
            in_personal_collection=self.in_personal_collection,
        )


@dataclass
class NamesIndex:
    """The available documents by id, and by each folded word of their names and each
    collection (a posting list per collection); the name words by each spelling one letter
    shorter (for typos, `deletions`); how many documents each collection has."""

    fingerprint: tuple
    documents: dict[int, IndexedDocument] = field(default_factory=dict)
    # word → collection → the ids of its documents whose names hold the word
    postings: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    deletions: dict[str, set[str]] = field(default_factory=dict)
    totals: dict[int, int] = field(default_factory=dict)  # collection → documents
    personal_collections: frozenset[int] = frozenset()

    def add(self, document: IndexedDocument, typo_min_length: int) -> None:
        self.documents[document.id] = document
        collection = document.collection_id
        self.totals[collection] = self.totals.get(collection, 0) + 1
        for word in document.vocabulary:
            first = word not in self.postings
            per_collection = self.postings.setdefault(word, {})
            per_collection.setdefault(collection, []).append(document.id)
            if first and len(word) >= typo_min_length:
                for shorter in deletions_of(word):
                    self.deletions.setdefault(shorter, set()).add(word)

    def near(self, word: str, typo_min_length: int) -> set[str]:
        """The name words equal to `word` or possibly one edit from it (a superset of the
        ones `words_match` accepts: every pair one insertion, deletion, substitution or swap
        apart shares a spelling one letter shorter, or one is the other shortened)."""
        found = {word} if word in self.postings else set()
        if len(word) < typo_min_length:
            return found
        found |= self.deletions.get(word, set())
        for shorter in deletions_of(word):
            if shorter in self.postings:
                found.add(shorter)
            found |= self.deletions.get(shorter, set())
        return found

    def frequency(self, word: str, reader: Reader, searched_files: list[IndexedDocument]) -> int:
        """How many documents `reader` searches hold `word` in their names."""
        total = sum(1 for document in searched_files if word in document.vocabulary)
        return total + sum(
            len(documents)
            for documents in self._searched(self.postings.get(word, {}), reader).values()
        )

    def holding(self, word: str, reader: Reader, searched_files: list[IndexedDocument]) -> set[int]:
        """The ids of the documents `reader` searches whose names hold `word`: a loop over
        collections, never over documents (the lists are joined by the set, in C)."""
        ids = {document.id for document in searched_files if word in document.vocabulary}
        for documents in self._searched(self.postings.get(word, {}), reader).values():
            ids.update(documents)
        return ids

    def total(self, reader: Reader, searched_files: list[IndexedDocument]) -> int:
        """How many documents `reader` searches."""
        return len(searched_files) + sum(self._searched(self.totals, reader).values())

    def _searched(self, per_collection: dict, reader: Reader) -> dict:
        """The entries of `per_collection` (collection id → anything) of the collections whose
        available documents `reader` searches (`available_collection_searched`, the rule)."""
        if not reader.is_superuser and len(reader.collection_ids) < len(per_collection):
            keys = [pk for pk in reader.collection_ids if pk in per_collection]
        else:
            keys = list(per_collection)
        return {
            pk: per_collection[pk]
            for pk in keys
            if available_collection_searched(
                reader, collection_id=pk, is_personal=pk in self.personal_collections
            )
        }


def deletions_of(word: str) -> set[str]:
    """`word` with one letter left out, every way."""
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


@dataclass
class _Cache:
    index: NamesIndex | None = None
    checked_at: float | None = None  # time.monotonic() of the last fingerprint read


_lock = threading.Lock()
_cache = _Cache()


def _fingerprint() -> tuple:
    with connection.cursor() as cursor:
        cursor.execute(_FINGERPRINT_SQL)
        return (connection.settings_dict["NAME"], *cursor.fetchone())


def names_index_build(
    fingerprint: tuple,
    rows: Iterable[tuple[int, str, str, str | None, int | None, int, bool]],
    *,
    name_words,
    file_stem,
    typo_min_length: int,
) -> NamesIndex:
    """The index of (id, title, source, original file name, owner id, collection id, in the
    personal collection) rows; `name_words` folds a name into its words, `file_stem` gives a
    document's file name without extension (chat/answering/named_documents.py's)."""
    index = NamesIndex(fingerprint=fingerprint)
    personal = set()
    for pk, title, source, original_name, owner_id, collection_id, is_personal in rows:
        names = (title, file_stem(source, original_name))
        words = frozenset(w for name in names for w in name_words(name))
        shown = personal_file_label(title) if owner_id is not None else title
        index.add(
            IndexedDocument(pk, shown, names, words, collection_id, bool(is_personal)),
            typo_min_length,
        )
        if is_personal:
            personal.add(collection_id)
    index.personal_collections = frozenset(personal)
    return index


def names_index_get(*, name_words, file_stem, typo_min_length: int) -> NamesIndex:
    """The process's index, its fingerprint read again when RECHECK_SECONDS have passed since
    the last read, and rebuilt (one statement) when it changed."""
    now = time.monotonic()
    with _lock:
        cached, checked_at = _cache.index, _cache.checked_at
    database = connection.settings_dict["NAME"]
    if (
        cached is not None
        and checked_at is not None
        and cached.fingerprint[0] == database
        and now - checked_at < vocabulary.RECHECK_SECONDS
    ):
        return cached
    fingerprint = _fingerprint()
    if cached is None or cached.fingerprint != fingerprint:
        with connection.cursor() as cursor:
            cursor.execute(_ROWS_SQL)
            rows = cursor.fetchall()
        cached = names_index_build(
            fingerprint,
            rows,
            name_words=name_words,
            file_stem=file_stem,
            typo_min_length=typo_min_length,
        )
    with _lock:
        _cache.index, _cache.checked_at = cached, now
    return cached


def names_index_forget() -> None:
    """Read the fingerprint again at the next question (tests, after changing documents)."""
    with _lock:
        _cache.checked_at = None
