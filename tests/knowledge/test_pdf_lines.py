"""A PDF's lines classified from its text alone: page numbers left out, heading lines
paragraphs of their own (knowledge/parsers/pdf.py), and such a numbered heading never quoted
(knowledge/sentences.py)."""

from __future__ import annotations

import pytest

from knowledge.parsers import document_parse
from knowledge.parsers.pdf import is_heading_line, pages_lines, pdf_paragraphs
from knowledge.sentences import answerable_sentences

FULL = "This line is as long as the page's full lines usually are, seventy or eighty chars."


def pdf_with_page_numbers() -> bytes:
    """Two pages, each a numbered heading and a paragraph ending on a full line, the next
    heading right after it, and a footer "Page N of 2", written by fpdf2."""
    from fpdf import FPDF

    class Policy(FPDF):
        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", size=8)
            self.cell(0, 5, f"Page {self.page_no()} of 2")

    pdf = Policy()
    pages = [
        [("1. Annual leave", "Full-time staff receive 25 days of annual leave a year; unused "
          "days may be carried over up to five days, with the approval of a line manager.")],
        [("2. Sick leave", "Tell your manager before ten on the first day of sickness. A fit "
          "note from a doctor is needed after seven calendar days of absence from work."),
         ("2.1 Returning to work", "A short meeting is held on the first day back.")],
    ]  # fmt: skip
    for sections in pages:
        pdf.add_page()
        for heading, paragraph in sections:
            pdf.set_font("Helvetica", "B", 13)
            pdf.multi_cell(0, 7, heading, new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("Helvetica", size=10.5)
            pdf.multi_cell(0, 5.5, paragraph, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def test_pdf_page_numbers_are_left_out_and_headings_are_paragraphs_never_quoted():
    parsed = document_parse(data=pdf_with_page_numbers(), name="leave.pdf")

    assert "Page 1 of 2" not in parsed.text and "Page 2 of 2" not in parsed.text
    assert [block.text for block in parsed.blocks if block.text[0].isdigit()] == [
        "1. Annual leave",
        "2. Sick leave",
        "2.1 Returning to work",
    ]
    quotable = answerable_sentences(parsed.text, sheet=False)
    assert quotable[0].startswith("Full-time staff receive 25 days")
    assert "A short meeting is held on the first day back." in quotable
    assert not [sentence for sentence in quotable if "leave" in sentence.lower()[:20]]
    assert all(sentence.endswith(".") for sentence in quotable), quotable


def test_only_a_page_number_at_a_page_edge_is_left_out():
    pages = [f"Page 1 of 2\nIntro\n{FULL}\nThere are 12\n1", f"- 2 -\n{FULL}\n12"]

    assert pages_lines(pages) == [["Intro", FULL, "There are 12"], [FULL]]


@pytest.mark.parametrize(
    ("line", "heading"),
    [
        ("5. Meals and subsistence", True),
        ("4.1 Trains", True),
        ("Northwind Analytics Expenses and Travel Policy", True),
        ("the rest of a sentence wrapped", False),  # no capital: a paragraph's last line
        ("It is paid within five days.", False),  # ends as a sentence does
        ("The limits are:", False),  # introduces what follows
        ("- Laptops and monitors", False),  # a bullet
        (FULL[:-10], False),  # as long as a full line
    ],
)
def test_heading_lines_are_short_capitalised_and_not_sentences(line, heading):
    assert is_heading_line(line, full=len(FULL)) is heading


def test_a_heading_after_a_full_line_ending_a_sentence_is_a_paragraph_of_its_own():
    lines = [FULL, FULL, "6. Client entertainment", FULL, "short end."]

    assert list(pdf_paragraphs(lines)) == [
        f"{FULL} {FULL}",
        "6. Client entertainment",
        f"{FULL} short end.",
    ]


def test_a_short_line_inside_a_paragraph_is_not_a_heading():
    lines = [FULL.replace(".", ","), "London Paddington", FULL]

    assert list(pdf_paragraphs(lines)) == [f"{FULL.replace('.', ',')} London Paddington", FULL]
