"""Content words as answering counts them (chat/answering/terms.py): lower-cased, stop words
and one-letter words left out (digits kept), possessives dropped, lightly stemmed; each word's
term remembered in a bounded cache."""

from __future__ import annotations

from chat.answering.terms import TERM_CACHE_WORDS, _term, terms


def test_content_words_are_lower_cased_stemmed_and_stop_words_left_out():
    assert terms("The Policies of the company's offices: carrying 3 bags, I walked.") == [
        "policy",
        "company",
        "office",
        "carry",
        "3",
        "bag",
        "walk",
    ]


def test_possessives_with_either_apostrophe_are_dropped_and_other_apostrophes_kept():
    assert terms("Anna's desk, Anna’s chair") == ["anna", "desk", "anna", "chair"]
    assert terms("O'Neill can't") == ["o'neill", "can't"]


def test_short_words_keep_their_endings():
    # -ies, -ing and -ed are stemmed only on words long enough to keep a stem; -s not after s, u, i.
    assert terms("ties sing bed bus glass class lies things wanted") == [
        "tie",
        "sing",
        "bed",
        "bus",
        "glass",
        "class",
        "lie",
        "thing",
        "want",
    ]


def test_the_same_text_gives_the_same_terms_from_the_cache_which_is_bounded():
    text = "Employees receive twenty-five days of annual leave."
    first = terms(text)
    hits = _term.cache_info().hits
    assert (
        terms(text) == first == ["employee", "receive", "twenty", "five", "day", "annual", "leave"]
    )
    assert _term.cache_info().hits >= hits + len(text.split())
    assert _term.cache_info().maxsize == TERM_CACHE_WORDS
