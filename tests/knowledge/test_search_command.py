"""`manage.py search`: the operator's view of retrieval."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.support.knowledge_base import document_create

pytestmark = pytest.mark.django_db

LINE = re.compile(
    r"^ ?(?P<rank>\d+)\. score (?P<score>\d\.\d{4})  similarity (?P<similarity>-?\d\.\d{3})  "
    r"(?P<title>.+) \(document (?P<document>\d+), chunk (?P<chunk>\d+)\)(?P<where>.*)$"
)


def search(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("search", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


@pytest.fixture
def handbook():
    return document_create(
        title="Staff Handbook",
        texts=[
            "Core hours are 10:00 to 15:00.",
            "Every full-time employee receives 25 days of annual leave per year.",
        ],
        sections=["Handbook > Working hours", "Handbook > Annual leave"],
    )


@pytest.fixture
def expenses():
    return document_create(
        title="Expenses Policy",
        texts=["The hotel limit is 150 pounds per night in London.", "Mileage is 45p a mile."],
        pages=[2, 3],
    )


def test_search_prints_ranked_chunks_with_scores_location_and_excerpt(handbook, expenses):
    output, _ = search("how many days of annual leave", "--top-k", "3")

    lines = output.splitlines()
    assert len(lines) == 6  # a heading line and an excerpt line per chunk
    first = LINE.match(lines[0])
    assert first, lines[0]
    assert first["rank"] == "1"
    assert first["title"] == "Staff Handbook"
    assert first["document"] == str(handbook.pk)
    assert first["chunk"] == "1"
    assert first["where"] == "  section Handbook > Annual leave"
    assert 0.3 < float(first["similarity"]) <= 1
    assert lines[1] == "    Every full-time employee receives 25 days of annual leave per year."
    ranks = [LINE.match(line)["rank"] for line in lines[::2]]
    assert ranks == ["1", "2", "3"]
    scores = [float(LINE.match(line)["score"]) for line in lines[::2]]
    assert scores == sorted(scores, reverse=True)


def test_search_shows_pages_and_can_be_limited_to_documents(handbook, expenses):
    output, _ = search("hotel in London", "--document", str(expenses.pk), "--top-k", "5")

    headings = [LINE.match(line) for line in output.splitlines()[::2]]
    assert {match["document"] for match in headings} == {str(expenses.pk)}
    assert headings[0]["where"] == "  page 2"


def test_search_modes(handbook, expenses):
    lexical, _ = search("annual leave", "--mode", "lexical")
    vector, _ = search("vacation entitlement", "--mode", "vector", "--top-k", "1")

    assert len(lexical.splitlines()) == 2  # only the chunk holding the words
    assert "25 days of annual leave" in lexical
    assert len(vector.splitlines()) == 2
    assert "annual leave" in vector


def test_search_with_no_matching_chunk_says_so(handbook):
    output, _ = search("zzyzx qwerty", "--mode", "lexical")
    assert output.strip() == "No matching chunks."


def test_search_on_an_empty_knowledge_base_says_so():
    output, _ = search("annual leave")
    assert "knowledge base is empty" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--top-k", "0"], "--top-k: top_k must be between 1 and 20"),
        (["--top-k", "21"], "--top-k: top_k must be between 1 and 20"),
        (["--top-k", "many"], "invalid int value"),
        (["--mode", "semantic"], "--mode must be one of: hybrid, vector, lexical"),
        (["--document", "999999"], "No document with id 999999"),
    ],
)
def test_search_refuses_bad_options_with_a_clear_error(handbook, args, message):
    with pytest.raises(CommandError, match=re.escape(message)):
        search("annual leave", *args)


def test_search_refuses_an_empty_question():
    with pytest.raises(CommandError, match="The question is empty"):
        search("   ")
