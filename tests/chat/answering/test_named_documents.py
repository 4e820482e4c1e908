"""Finding the document a question names (chat/answering/named_documents.py): names and their
fuzzy variants, generic words and topics that are not names, and only among the documents
the asker may read."""

from __future__ import annotations

import random
import sys
import time

import pytest

from chat.answering import named_documents
from chat.answering.named_documents import (
    TYPO_MIN_LENGTH,
    DocumentNames,
    file_name_of,
    name_words,
    named_document_find,
    named_document_match,
    named_documents_indexed,
    named_documents_match,
    word_fold,
    words_match,
)
from chat.answering.named_index import names_index_build
from knowledge.access import Reader, reader_for
from knowledge.collections import collection_create
from knowledge.models import Document
from tests.support.knowledge_base import EXPENSES_TEXTS, LEAVE_TEXTS, document_create
from tests.support.readers import readers_create

DOCUMENTS = [
    DocumentNames(1, "Employee & Staff Handbook", ("Employee & Staff Handbook", "handbook-2026")),
    DocumentNames(2, "Refunds Policy", ("Refunds Policy", "Refunds Policy")),
    DocumentNames(3, "Expenses and Travel Policy", ("Expenses and Travel Policy", "expenses")),
    DocumentNames(4, "IT Security Policy", ("IT Security Policy", "it-security-policy")),
    DocumentNames(5, "Victoria", ("Victoria", "Victoria")),
]


def named(question: str) -> int | None:
    found = named_document_match(question, DOCUMENTS)
    return found.id if found else None


@pytest.mark.parametrize(
    ("question", "document"),
    [
        ("In the staff handbook, how is overtime paid?", 1),
        ("What does the refund policy say about digital products?", 2),
        ("According to the expenses policy, what is the mileage rate?", 3),
        ("What does the IT security policy say about USB sticks?", 4),
        ("Per the employee handbook, how much leave do I get?", 1),
        ("Staff handbook: how many days can I work from home?", 1),
        ("Check the travel policy: can I fly business class?", 3),
        ("In it-security-policy.html, how long must passwords be?", 4),
    ],
)
def test_a_question_naming_a_document_finds_it(question, document):
    assert named(question) == document


@pytest.mark.parametrize(
    ("question", "document"),
    [
        ("in the STAFF HANDBOOK, how is overtime paid?", 1),  # case
        ("What do the refunds policies say about digital products?", 2),  # plurals
        ("What does the refund policy say about digital products?", 2),  # singular of a plural
        ("In the handbook, how is overtime paid?", 1),  # a word of the name missing
        ("In the staff handbok, how is overtime paid?", 1),  # a typo
        ("What does the securty policy say about USB sticks?", 4),  # a typo
        ("In the travel and expenses policy, what is the hotel limit?", 3),  # words swapped
    ],
)
def test_names_are_matched_fuzzily(question, document):
    assert named(question) == document


@pytest.mark.parametrize(
    "question",
    [
        "What does the policy say about digital products?",  # a word of three names
        "In our policy, how is overtime paid?",
        "What is the policy on alcohol?",
        "How do I claim travel expenses for a trip?",  # the name's words, not as a name
        "What's the refund policy for new customers?",  # no word points to a document
        "What is the lowest recorded temperature in Victoria?",  # a topic, not a document
        "How is overtime paid?",
        "",
    ],
)
def test_generic_words_and_topics_name_no_document(question):
    assert named(question) is None


def test_short_words_need_an_exact_match():
    assert words_match("handbok", "handbook")
    assert not words_match("pay", "day")  # too short for a typo
    assert word_fold("Policies") == word_fold("policy") == "policy"
    assert word_fold("Refunds") == "refund"


def test_the_coverage_threshold_decides():
    # "handbook" covers half of "Employee & Staff Handbook"'s distinctive weight, no more.
    question = "In the handbook, how is overtime paid?"
    assert named_document_match(question, DOCUMENTS, coverage=0.3) is not None
    assert named_document_match(question, DOCUMENTS, coverage=0.9) is None


def test_the_file_name_is_the_original_name_else_the_source_end():
    assert file_name_of("uploads/x/9f.pdf", "Refunds Policy.pdf") == "Refunds Policy.pdf"
    assert file_name_of("/srv/docs/staff-handbook.md", None) == "staff-handbook.md"
    assert file_name_of("https://intranet.example/policies/travel/", None) == "travel"


def test_matching_stays_cheap_for_a_few_hundred_documents():
    many = [
        DocumentNames(i, f"Team {i} onboarding guide", (f"Team {i} onboarding guide",))
        for i in range(300)
    ]
    many.append(DocumentNames(999, "Staff handbook", ("Staff handbook", "staff-handbook")))
    started = time.perf_counter()
    found = named_document_match("In the staff handbook, how is overtime paid?", many)
    assert found is not None and found.id == 999
    assert time.perf_counter() - started < 0.5


# --- Among the documents the asker may read ------------------------------------------------------
@pytest.mark.django_db
def test_only_a_document_the_asker_may_read_is_found():
    people = readers_create(with_outsiders=False)
    hr_only = collection_create(name="HR only", groups=[people["hr"]])
    pay = document_create(title="Pay bands 2026", texts=LEAVE_TEXTS, collection=hr_only)
    document_create(title="Expenses policy", texts=EXPENSES_TEXTS)
    question = "What does the pay bands document say about grade 7?"

    found = named_document_find(question, reader=reader_for(people["asker"]))
    assert found is not None and (found.id, found.title) == (pay.pk, "Pay bands 2026")
    assert named_document_find(question, reader=reader_for(people["staff"])) is None


@pytest.mark.django_db
def test_a_withdrawn_document_or_one_outside_the_filter_is_not_found():
    handbook = document_create(title="Staff handbook", texts=LEAVE_TEXTS)
    expenses = document_create(title="Expenses policy", texts=EXPENSES_TEXTS)
    people = readers_create(with_outsiders=False)
    reader = reader_for(people["staff"])
    question = "In the staff handbook, how many days of leave do I get?"

    assert named_document_find(question, reader=reader).id == handbook.pk
    assert named_document_find(question, reader=reader, within=[expenses.pk]) is None
    Document.objects.filter(pk=handbook.pk).update(enabled=False)
    assert named_document_find(question, reader=reader) is None


@pytest.mark.django_db
def test_an_uploaded_file_is_found_by_its_original_name():
    document = document_create(
        title="Q3 customer terms",
        texts=EXPENSES_TEXTS,
        metadata={"original_name": "Refunds Policy.pdf"},
    )
    people = readers_create(with_outsiders=False)

    found = named_document_find(
        "What does the refund policy say about digital products?",
        reader=reader_for(people["staff"]),
    )
    assert found is not None and found.id == document.pk


# --- The process's index: the same documents, work that does not follow the library ---------------
KIND_WORDS = ["policy", "handbook", "guide", "manual", "report", "minutes"]
TOPIC_WORDS = [
    "travel", "expenses", "security", "onboarding", "refunds", "leave", "payroll", "privacy",
    "north", "south", "annual", "quarterly", "supplier", "inventory", "vehicle", "training",
]  # fmt: skip
QUESTION_SHAPES = [
    "What does the {} say about the deadline?",
    "In the {}, how is overtime paid?",
    "According to {}, who approves it?",
    "{}: how many days are allowed?",
    "Is the {} the one about lunch?",
]


def _library(rng, size: int, collections: int) -> list[tuple]:
    rows = []
    for pk in range(1, size + 1):
        title_words = rng.sample(TOPIC_WORDS, rng.randint(1, 3)) + [rng.choice(KIND_WORDS)]
        if rng.random() < 0.2:
            title_words.append(str(rng.randint(1, 40)))
        title = " ".join(word.capitalize() for word in title_words)
        source = f"/srv/{'-'.join(rng.sample(TOPIC_WORDS, rng.randint(1, 2)))}.pdf"
        personal = rng.random() < 0.1
        collection = collections + 1 if personal else rng.randint(1, collections)
        owner = 7 if personal else None
        rows.append((pk, title, source, None, owner, collection, personal))
    return rows


def _index(rows: list[tuple]):
    return names_index_build(
        ("test",),
        rows,
        name_words=name_words,
        file_stem=lambda source, original: file_name_of(source, original).rsplit(".", 1)[0],
        typo_min_length=TYPO_MIN_LENGTH,
    )


def _typo(rng, word: str) -> str:
    if len(word) < TYPO_MIN_LENGTH:
        return word
    at = rng.randrange(len(word))
    return word[:at] + word[at + 1 :]


@pytest.mark.parametrize("max_runs", [named_documents.MAX_RUNS, 0])
def test_the_index_names_the_same_documents_as_a_look_at_every_document(max_runs, monkeypatch):
    """Random libraries whose names share words, readers of some collections with and without
    an attached personal file, questions naming a run of a name (a typo at times): the index
    finds exactly what `named_documents_match` finds among every document the reader
    searches; so does its fallback for questions with too many readings (MAX_RUNS 0: every
    document holding a word of the question is looked at)."""
    monkeypatch.setattr(named_documents, "MAX_RUNS", max_runs)
    rng = random.Random(20261129)
    compared = named_some = 0
    for _library_number in range(40):
        rows = _library(rng, rng.choice([5, 30, 120]), collections=3)
        index = _index(rows)
        by_id = {row[0]: row for row in rows}
        for _question_number in range(25):
            personal = [row[0] for row in rows if row[6]]
            reader = Reader(
                user_id=7,
                is_superuser=rng.random() < 0.15,
                collection_ids=frozenset(rng.sample([1, 2, 3], rng.randint(0, 3))),
                searched_file_ids=frozenset(rng.sample(personal, min(len(personal), 1))),
            )
            row = by_id[rng.randint(1, len(rows))]
            words = row[1].split()
            first = rng.randrange(len(words))
            run = [w if rng.random() < 0.8 else _typo(rng, w) for w in words[first:]]
            question = rng.choice(QUESTION_SHAPES).format(" ".join(run))
            searched = [
                index.documents[pk]
                for pk in sorted(index.documents)
                if index.documents[pk].searched_by(reader)
            ]
            expected = named_documents_match(
                question, [DocumentNames(d.id, d.title, d.names) for d in searched]
            )
            found = named_documents_indexed(question, index, reader)
            assert found == expected, (question, reader)
            compared += 1
            named_some += bool(found)
    assert compared == 1000 and named_some > 200  # the questions do name documents


def _python_calls(function) -> int:
    calls = 0

    def count(_frame, event, _arg):
        nonlocal calls
        if event in {"call", "c_call"}:
            calls += 1

    sys.setprofile(count)
    try:
        function()
    finally:
        sys.setprofile(None)
    return calls


def test_the_index_work_does_not_follow_the_names_sharing_a_word_of_the_question():
    """A question naming one document among 10 others, then among 1,000 and 10,000 more whose
    names share a word of its name ("Staff handbook" and "Team N handbook"): the same
    document, and the same number of Python calls with 1,000 and 10,000 (counted, not timed;
    with 10 the word "handbook" singles the document out alone, a few calls more): no document
    is looked at because it shares a word (docs/decisions/0150-answer-cost-per-question.md)."""
    question = "In the staff handbook, how is overtime paid?"
    reader = Reader(user_id=1, collection_ids=frozenset({1, 2}))
    base = [(1, "Staff handbook", "/srv/staff-handbook.md", None, None, 1, False)] + [
        (pk, f"Expenses policy {pk}", f"/srv/expenses-{pk}.md", None, None, 1, False)
        for pk in range(2, 12)
    ]

    def grown(count: int) -> list[tuple]:
        return base + [
            (pk, f"Team {pk} handbook", f"/srv/team-{pk}.md", None, None, 1 + pk % 2, False)
            for pk in range(100, 100 + count)
        ]

    calls = []
    for rows in (base, grown(1_000), grown(10_000)):
        index = _index(rows)
        assert [d.id for d in named_documents_indexed(question, index, reader)] == [1]
        calls.append(
            _python_calls(lambda index=index: named_documents_indexed(question, index, reader))
        )
    assert calls[1] == calls[2] < 2 * calls[0]
