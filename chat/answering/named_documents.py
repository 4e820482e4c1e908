"""A question that names a document the asker may read ("What does the refund policy say
about digital products?", "In the staff handbook, how is overtime paid?"): which one.

`named_documents_find(question, reader=...)` compares the question's words with the names of
the documents searched for `reader` (`knowledge.search_scope.searchable_documents`: only those,
so a document the asker may not read is never matched and a name changes nothing for them),
and returns the named documents, best first (at most MAX_NAMED, each named by its own words:
"Compare inventory.xlsx and suppliers.csv" names two); `named_document_find` the best one or
None. A document's names are its title and its file's name
(the uploaded file's original name, else the last part of its source), without extension.

A name is matched when (all three):

- a run of consecutive words of the question (small words such as "the", "and" left out of
  both) matches words of the name: equal after folding case, a plural "s"/"es"/"ies" and a
  possessive "'s", or, for words of 5 letters or more, one letter added, dropped, changed or
  two swapped ("handbok");
- the words matched cover at least NAME_COVERAGE of the name's weight, each word of a name
  weighing its inverse frequency among the names of the asker's documents (a word in many
  names, "policy", weighs little: alone it never names one), and the words matched are in
  no other of the asker's documents' names (they single one out);
- the question refers to it as a document: the run is followed by a word such as "say(s)",
  "state(s)", "mention(s)", "cover(s)", "document", "file", "pdf", "deck", "sheet"; or preceded
  by "according to", "per", "check", "see", "read", "consult", "search", or by "in", "from",
  "under", "within", "inside", "using", "compare", "between", "and", "vs", "with" when the
  words matched hold a word for a kind of document ("policy", "handbook", "FAQ", "guide",
  "deck"…) or a file extension follows them ("in the staff handbook", never "in Victoria");
  articles and possessives ("the", "our") and one other word ("per the employee handbook")
  may stand between; or the run opens the question followed by ":" or "-" ("Staff
  handbook: …").

The best match (highest coverage, then fewest other words, then the lower document id) wins.
Why these rules, and the threshold's figures:
docs/decisions/0037-a-question-that-names-a-document.md.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from chat.answering.named_index import NamesIndex, names_index_get
from chat.answering.stage_cpu import cpu_stage
from knowledge.access import Reader
from knowledge.personal import personal_file_label
from knowledge.search_scope import documents_searched_among

# Share of a name's weight the matched words must cover, chosen on folds of demo/eval/named.json
# (docs/decisions/0037-a-question-that-names-a-document.md).
NAME_COVERAGE = 0.5
# At most this many documents named by one question are searched ("Compare A, B and C").
MAX_NAMED = 3
# Words of at least this many letters match with one edit (a small typo).
TYPO_MIN_LENGTH = 5
# The runs of a question's words the index looks at before it falls back to every document
# holding one of its words (a question of a few words and their typos is a few dozen).
MAX_RUNS = 2000


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?")
_SMALL_WORDS = _word_set(
    "a an and the of for to in on at by with or & v vs our my your their its this that these "
    "those company company's"
)
_ARTICLES = _word_set("the a an our my your their this that company company's")
# Before the name: words that point into a document whatever it is called ...
_CUES_BEFORE = _word_set("per check see read consult search")
# ... and words that do so only for a name that says it is a document ("in the staff handbook"
# but not "in Victoria").
# A list of names counts too ("compare the refund policy and the staff handbook",
# "inventory.xlsx vs suppliers.csv").
_PLACES_BEFORE = _word_set(
    "in from under within inside using compare comparing between and vs versus with"
)
_DOCUMENT_WORDS = _word_set(
    "policy handbook faq guide guideline manual deck slide presentation report minute memo "
    "spreadsheet sheet workbook document doc file pdf note wiki handout brochure playbook "
    "charter procedure checklist template newsletter readme specification spec proposal "
    "catalogue catalog agreement contract rulebook booklet leaflet sop"
)
_EXTENSION = re.compile(r"\.(?:pdf|docx?|xlsx?|pptx?|md|markdown|txt|html?|csv|odt|rtf)\b", re.I)
_COLONS = (":", "-", "–", "—")
_CUES_AFTER = _word_set(
    "say says said state states stated mention mentions mentioned cover covers covered tell "
    "tells explain explains describe describes define defines allow allows require requires "
    "document documents doc docs file pdf docx deck slides sheet spreadsheet"
)


@dataclass(frozen=True)
class DocumentNames:
    """A document the asker may read and the names it goes by (title, file name)."""

    id: int
    title: str  # as the asker sees it (a personal file's label)
    names: tuple[str, ...]


@dataclass(frozen=True)
class NamedDocument:
    """The document a question names, and how much of its name the question holds (0..1)."""

    id: int
    title: str
    coverage: float
    # Where the question names it: (start, end) character offsets of the words matched.
    span: tuple[int, int] = field(default=(0, 0), compare=False)

    def as_dict(self) -> dict[str, int | str]:
        return {"id": self.id, "title": self.title}


@dataclass(frozen=True)
class _Word:
    folded: str
    start: int
    end: int


def word_fold(word: str) -> str:
    """`word` lower-cased, without a possessive "'s" or a plural ending."""
    word = word.lower()
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ses", "xes", "ches", "shes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def _words(text: str) -> list[_Word]:
    return [_Word(word_fold(m.group()), m.start(), m.end()) for m in _WORD.finditer(text)]


@functools.lru_cache(maxsize=4096)
def name_words(name: str) -> tuple[str, ...]:
    """The folded words of a name that count (small words left out), each once."""
    seen: dict[str, None] = {}
    for word in _words(name):
        if word.folded not in _SMALL_WORDS:
            seen.setdefault(word.folded)
    return tuple(seen)


def _one_edit(a: str, b: str) -> bool:
    """Whether `a` becomes `b` by one insertion, deletion, substitution or adjacent swap."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    if len(a) > len(b):
        a, b = b, a
    return any(b[:i] + b[i + 1 :] == a for i in range(len(b)))


@functools.lru_cache(maxsize=65536)
def words_match(question_word: str, name_word: str) -> bool:
    """Equal (both folded), or one edit apart when both are long enough."""
    if question_word == name_word:
        return True
    return min(len(question_word), len(name_word)) >= TYPO_MIN_LENGTH and _one_edit(
        question_word, name_word
    )


def _referred_to(
    question: str, words: list[_Word], start: int, end: int, matched: Sequence[str]
) -> bool:
    """Whether the run words[start:end], matching the name words `matched`, is referred to as
    a document (the module docstring)."""
    after = question[words[end - 1].end :]
    documentish = bool(_EXTENSION.match(after)) or any(w in _DOCUMENT_WORDS for w in matched)
    if end < len(words) and words[end].folded in _CUES_AFTER:
        return True
    before = start - 1
    for skipped in range(2):  # one word the name does not hold may stand between ("employee")
        while before >= 0 and words[before].folded in _ARTICLES:
            before -= 1
        if before < 0:
            return skipped == 0 and after.lstrip()[:1] in _COLONS
        cue = words[before].folded
        if cue in _CUES_BEFORE or (cue in _PLACES_BEFORE and documentish):
            return True
        if cue == "to" and before > 0 and words[before - 1].folded == "according":
            return True
        before -= 1
    return False


def _best_named(
    question: str,
    words: list[_Word],
    content: list[int],
    candidates: Iterable[tuple[int, str, tuple[str, ...]]],
    *,
    weight: Callable[[str], float],
    shared: Callable[[int, list[str]], bool],
    coverage: float,
    most: int = 1,
) -> list[NamedDocument]:
    """The best of `candidates` (id, title as shown, names) that `question` names, at most
    `most` of them, best first, each named by a run of words no better one's run overlaps:
    `weight` of a name word, `shared(id, words)` whether another of the asker's documents
    holds all those words (the module docstring's rules)."""
    matches: list[tuple[tuple[float, int, int], int, int, NamedDocument]] = []
    for document_id, title, names in candidates:
        for name in names:
            wanted = name_words(name)
            if not wanted:
                continue
            name_weight = sum(weight(w) for w in wanted)
            for first in range(len(content)):
                matched: list[str] = []
                last = first
                while last < len(content):
                    word = words[content[last]].folded
                    hit = next(
                        (w for w in wanted if w not in matched and words_match(word, w)), None
                    )
                    if hit is None:
                        break
                    matched.append(hit)
                    last += 1
                if not matched:
                    continue
                share = sum(weight(w) for w in matched) / name_weight
                if share < coverage:
                    continue
                if shared(document_id, matched):
                    continue
                start, end = content[first], content[last - 1] + 1
                if not _referred_to(question, words, start, end, matched):
                    continue
                key = (share, -len(wanted), -document_id)
                found = NamedDocument(
                    id=document_id,
                    title=title,
                    coverage=share,
                    span=(words[start].start, words[end - 1].end),
                )
                matches.append((key, start, end, found))
    matches.sort(key=lambda match: match[0], reverse=True)
    chosen: list[NamedDocument] = []
    taken: list[tuple[int, int]] = []
    for _key, start, end, found in matches:
        if len(chosen) >= most:
            break
        if any(found.id == other.id for other in chosen):
            continue
        if any(start < other_end and other_start < end for other_start, other_end in taken):
            continue
        chosen.append(found)
        taken.append((start, end))
    return chosen


def _content_words(question: str) -> tuple[list[_Word], list[int]]:
    words = _words(question)
    return words, [i for i, word in enumerate(words) if word.folded not in _SMALL_WORDS]


def named_document_match(
    question: str, documents: Sequence[DocumentNames], *, coverage: float = NAME_COVERAGE
) -> NamedDocument | None:
    """The document of `documents` that `question` names (the module docstring's rules), or
    None. Pure: `documents` are the asker's (the caller selects them)."""
    found = named_documents_match(question, documents, coverage=coverage, most=1)
    return found[0] if found else None


def named_documents_match(
    question: str,
    documents: Sequence[DocumentNames],
    *,
    coverage: float = NAME_COVERAGE,
    most: int = MAX_NAMED,
) -> list[NamedDocument]:
    """The documents of `documents` that `question` names, best first, at most `most` (the
    module docstring's rules). Pure: `documents` are the asker's (the caller selects them)."""
    if not documents:
        return []
    words, content = _content_words(question)
    if not content:
        return []
    vocabularies = [{w for name in d.names for w in name_words(name)} for d in documents]
    frequency: dict[str, int] = {}
    for vocabulary in vocabularies:
        for word in vocabulary:
            frequency[word] = frequency.get(word, 0) + 1
    total = len(documents)

    def weight(word: str) -> float:
        return math.log(1 + total / frequency[word])

    def shared(document_id: int, matched: list[str]) -> bool:
        return any(
            d.id != document_id and all(w in v for w in matched)
            for v, d in zip(vocabularies, documents, strict=True)
        )

    asked = {words[i].folded for i in content}
    matching = {w for w in frequency if any(words_match(q, w) for q in asked)}
    candidates = [
        (d.id, d.title, d.names)
        for d, vocabulary in zip(documents, vocabularies, strict=True)
        if vocabulary & matching
    ]
    return _best_named(
        question,
        words,
        content,
        candidates,
        weight=weight,
        shared=shared,
        coverage=coverage,
        most=most,
    )


def named_documents_indexed(
    question: str,
    index: NamesIndex,
    reader: Reader,
    *,
    coverage: float = NAME_COVERAGE,
    most: int = MAX_NAMED,
) -> list[NamedDocument]:
    """`named_document_match` over the documents `reader` searches, read from `index`: the
    same documents, found without looking at every document whose name shares a word with the
    question. A document is named only by words of the question that no other of the asker's
    documents holds all of (`_single_outs`), so only the documents a run of the question's
    words singles out are looked at; a word's weight comes from the index's counts of the
    reader's collections."""
    words, content = _content_words(question)
    if not content:
        return []
    searched_files = [
        index.documents[pk] for pk in sorted(reader.searched_file_ids) if pk in index.documents
    ]
    total = index.total(reader, searched_files)
    if not total:
        return []
    frequencies: dict[str, int] = {}
    holders: dict[str, set[int]] = {}
    holding_all: dict[frozenset[str], set[int]] = {}

    def frequency(word: str) -> int:
        if word not in frequencies:
            frequencies[word] = index.frequency(word, reader, searched_files)
        return frequencies[word]

    def weight(word: str) -> float:
        return math.log(1 + total / frequency(word))

    def holding(word: str) -> set[int]:
        if word not in holders:
            holders[word] = index.holding(word, reader, searched_files)
        return holders[word]

    def holding_each(matched: Iterable[str]) -> set[int]:
        key = frozenset(matched)
        if key not in holding_all:
            sets = sorted((holding(w) for w in key), key=len)
            holding_all[key] = sets[0].intersection(*sets[1:])
        return holding_all[key]

    def shared(document_id: int, matched: list[str]) -> bool:
        # `document_id` holds every matched word: another does too when more than one does.
        return len(holding_each(matched)) > 1

    near = [
        sorted(
            w
            for w in index.near(words[i].folded, TYPO_MIN_LENGTH)
            if words_match(words[i].folded, w) and frequency(w) > 0
        )
        for i in content
    ]
    single_outs = _single_outs(near, holding)
    if single_outs is None:  # too many ways to read the question: every document holding a word
        single_outs = set().union(*(holding(w) for matches in near for w in matches))
    candidates = []
    for pk in sorted(single_outs):
        document = index.documents[pk]
        candidates.append((pk, document.title, document.names))
    return _best_named(
        question,
        words,
        content,
        candidates,
        weight=weight,
        shared=shared,
        coverage=coverage,
        most=most,
    )


def _single_outs(near: list[list[str]], holding: Callable[[str], set[int]]) -> set[int] | None:
    """The documents that hold every word of a run of name words matching a run of the
    question's content words (`near[k]`: the name words the k-th content word matches, one per
    content word, none twice) that no other document holds all of. `_best_named` names a
    document only by such words (any other document holding them all makes them `shared`), so
    these are all the documents it can name: the others need not be looked at. The work
    follows the question's runs and the words' matches, not the documents (`holding(word)`: the
    asker's documents holding a name word, as a set). None when more than MAX_RUNS runs would
    be looked at (many typo readings of many words): the caller then looks at every document
    holding one of the words."""
    looked_at = 0
    found: set[int] = set()
    for start in range(len(near)):
        runs: list[tuple[tuple[str, ...], set[int] | None]] = [((), None)]
        for matches in near[start:]:
            longer = []
            for run, held in runs:
                for word in matches:
                    if word in run:
                        continue
                    looked_at += 1
                    if looked_at > MAX_RUNS:
                        return None
                    ids = holding(word) if held is None else held & holding(word)
                    if ids:
                        longer.append(((*run, word), ids))
                        if len(ids) == 1:
                            found |= ids
            runs = longer
            if not runs:
                break
    return found


def question_about(question: str, named: NamedDocument, others: Iterable[NamedDocument]) -> str:
    """`question` as asked of `named` alone: the names of the `others` it names left out, and
    the file extensions written after a name ("Compare inventory.xlsx and suppliers.csv:
    lead times" asked of suppliers.csv: "Compare and suppliers: lead times")."""
    spans = sorted(other.span for other in others if other.id != named.id and other.span[1])
    kept, at = [], 0
    for start, end in spans:
        kept.append(question[at:start])
        extension = _EXTENSION.match(question, end)
        at = extension.end() if extension else end
    kept.append(question[at:])
    return re.sub(r"\s+", " ", _EXTENSION.sub("", "".join(kept))).strip()


def searched_documents_of(
    document_id: int | None, title: str, stored: object
) -> list[dict[str, int | str]]:
    """The `searched_documents` of an answer's events and of the API, `[{id, title}]`, from the
    stored message's fields (`stored`: its list of `{id, title}` or of (id, title) pairs; an
    answer stored before the list was: its one searched document); empty when its question
    named none."""
    if isinstance(stored, list | tuple) and stored:
        return [
            {"id": int(d["id"]), "title": str(d["title"])}
            if isinstance(d, dict)
            else {"id": int(d[0]), "title": str(d[1])}
            for d in stored
        ]
    one = searched_document_of(document_id, title)
    return [one] if one is not None else []


def searched_document_of(document_id: int | None, title: str) -> dict[str, int | str] | None:
    """The `searched_document` of an answer's events and of the API, `{id, title}`, from the
    stored message's fields; None when its question named no document."""
    return None if document_id is None else {"id": document_id, "title": title}


def file_name_of(source: str, original_name: object = None) -> str:
    """The name of a document's file: the uploaded file's original name (`metadata
    ["original_name"]`) when it is a string, else the last part of its source (a path or
    URL)."""
    if isinstance(original_name, str) and original_name:
        return original_name
    return PurePosixPath(source.rstrip("/").replace("\\", "/")).name


def document_names_build(
    rows: Iterable[tuple[int, str, str, str | None, int | None]],
) -> list[DocumentNames]:
    """`DocumentNames` from (id, title, source, original file name, owner id) rows; a file
    name without its extension."""
    documents = []
    for pk, title, source, original_name, owner_id in rows:
        stem = PurePosixPath(file_name_of(source, original_name)).stem
        shown = personal_file_label(title) if owner_id is not None else title
        documents.append(DocumentNames(id=pk, title=shown, names=(title, stem)))
    return documents


def _file_stem(source: str, original_name: object) -> str:
    return PurePosixPath(file_name_of(source, original_name)).stem


@cpu_stage("named")
def named_documents_find(
    question: str, *, reader: Reader, within: Sequence[int] | None = None
) -> list[NamedDocument]:
    """The documents searched for `reader` that `question` names, best first, at most
    MAX_NAMED ("Compare inventory.xlsx and suppliers.csv": both); with `within`, only among
    those documents (the request's document filter). Read from the process's index of the
    available documents' names (chat/answering/named_index.py: no statement but its
    fingerprint's, every RECHECK_SECONDS), kept to what `reader` searches; the documents found
    are confirmed searched for `reader` in the database (one statement, only when one is
    found), so a document withdrawn or moved since the index was read is never named."""
    index = names_index_get(
        name_words=name_words, file_stem=_file_stem, typo_min_length=TYPO_MIN_LENGTH
    )
    if within is None:
        found = named_documents_indexed(question, index, reader)
    else:
        documents = []
        for pk in sorted(set(within)):
            document = index.documents.get(pk)
            if document is not None and document.searched_by(reader):
                documents.append(DocumentNames(document.id, document.title, document.names))
        found = named_documents_match(question, documents)
    if not found:
        return []
    confirmed = documents_searched_among(reader, [d.id for d in found])
    return [d for d in found if d.id in confirmed]


def named_document_find(
    question: str, *, reader: Reader, within: Sequence[int] | None = None
) -> NamedDocument | None:
    """The document searched for `reader` that `question` names best (`named_documents_find`'s
    first), or None."""
    found = named_documents_find(question, reader=reader, within=within)
    return found[0] if found else None
