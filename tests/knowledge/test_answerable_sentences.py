"""Which pieces of a chunk an answer may quote (knowledge/sentences.py): never a numbered
heading standing as its own paragraph, a page number or a caption, in any format's text."""

from __future__ import annotations

import pytest

from knowledge.sentences import answerable_sentences, is_answerable


def test_a_numbered_heading_paragraph_is_never_quoted():
    text = (
        "5. Meals and subsistence\n\nYou may claim meals up to GBP 35 a day.\n\n"
        "4.1 Trains\n\nRail is the preferred way to travel."
    )

    assert answerable_sentences(text, sheet=False) == [
        "You may claim meals up to GBP 35 a day.",
        "Rail is the preferred way to travel.",
    ]


@pytest.mark.parametrize(
    ("text", "quoted"),
    [
        # A list's items (a line break apart, not a blank line) are not headings.
        (
            "1. Submit the claim form today\n2. Wait for the approval",
            ["Submit the claim form today", "Wait for the approval"],
        ),
        # A numbered paragraph that ends as a sentence does is a sentence.
        (
            "Steps:\n\n1. Submit the claim in the expenses system.",
            ["Submit the claim in the expenses system."],
        ),
        # A heading glued to a sentence in one paragraph is not told apart (the PDF parser
        # keeps heading lines apart, knowledge/parsers/pdf.py).
        (
            "Claim within 30 days. 12. Breaches of this policy",
            ["Claim within 30 days.", "Breaches of this policy"],
        ),
    ],
)
def test_numbered_list_items_and_sentences_are_still_quoted(text, quoted):
    assert answerable_sentences(text, sheet=False) == quoted


@pytest.mark.parametrize(
    ("piece", "answerable"),
    [
        ("Page 3 of 12", False),
        ("page 4", False),
        ("3 / 12", False),
        ("Table 2: Daily meal limits", False),
        ("Figure 1 Approval flow", False),
        ("Table 3 shows that the limits rose.", True),
        ("Tables and chairs are ordered through facilities", True),
        ("The limit is 12 per day.", True),
    ],
)
def test_page_numbers_and_captions_are_not_answerable(piece, answerable):
    assert is_answerable(piece) is answerable


def test_positions_count_every_sentence_and_row_and_are_remembered_per_text():
    from knowledge.sentences import answerable_positions, row_spans, sentence_spans

    text = "4.1 Trains\n\nRail is the preferred way to travel. Page 3\n\nBook two weeks ahead."
    positions = answerable_positions(text, sheet=False)
    # The heading (0) and the page number (2) are sentences too: their places are kept.
    assert [p for p, _, _ in positions] == [1, 3]
    assert [text[s:e] for _, s, e in positions] == [
        "Rail is the preferred way to travel.",
        "Book two weeks ahead.",
    ]
    assert len(sentence_spans(text)) == 4
    rows = "Item | Price\nPX-11 | 12 EUR each unit\n\nQX-2207 | 40 EUR per box"
    assert [p for p, _, _ in answerable_positions(rows, sheet=True)] == [
        i for i, (s, e) in enumerate(row_spans(rows)) if is_answerable(rows[s:e])
    ]
    hits = answerable_positions.cache_info().hits
    assert answerable_positions(text, sheet=False) is positions  # a tuple: nobody can change it
    assert answerable_positions.cache_info().hits == hits + 1
