"""A PDF's lines classified from its text alone: running headers, footers and page numbers
left out, heading lines opening sections, paragraphs kept whole (knowledge/parsers/pdf.py)."""

from __future__ import annotations

import pytest

from knowledge.parsers import document_parse
from knowledge.parsers.pdf import heading_level, is_heading_line, pages_lines, pdf_paragraphs

FULL = "This line is as long as the page's full lines usually are, seventy or eighty chars."


def pdf_with_furniture() -> bytes:
    """Three pages, each with a running header, a numbered heading, a paragraph and a footer
    "Page N of 3", written by fpdf2."""
    from fpdf import FPDF

    class Policy(FPDF):
        def header(self) -> None:
            self.set_font("Helvetica", size=8)
            self.cell(0, 5, "Acme Ltd - Leave Policy - Version 2", new_x="LMARGIN", new_y="NEXT")

        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", size=8)
            self.cell(0, 5, f"Page {self.page_no()} of 3")

    pdf = Policy()
    sections = [
        ("1. Annual leave", "Full-time staff receive 25 days of annual leave a year. Unused "
         "days may be carried over up to five days, with the approval of a line manager."),
        ("2. Sick leave", "Tell your manager before ten on the first day of sickness. A fit "
         "note from a doctor is needed after seven calendar days of absence from work."),
        ("2.1 Returning to work", "A short return to work meeting is held on the first day "
         "back, to agree any adjustments that help you settle in again after the absence."),
    ]  # fmt: skip
    for heading, paragraph in sections:
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 13)
        pdf.multi_cell(0, 7, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=10.5)
        pdf.multi_cell(0, 5.5, paragraph, new_x="LMARGIN", new_y="NEXT")
    return bytes(pdf.output())


def test_pdf_running_header_and_page_numbers_are_left_out_and_headings_open_sections():
    parsed = document_parse(data=pdf_with_furniture(), name="leave.pdf")

    assert "Version 2" not in parsed.text and "Page 1 of 3" not in parsed.text
    assert "Annual leave" not in parsed.text  # a section, not text
    assert [(block.page, block.section) for block in parsed.blocks] == [
        (1, "1. Annual leave"),
        (2, "2. Sick leave"),
        (3, "2. Sick leave > 2.1 Returning to work"),
    ]
    assert parsed.blocks[0].text.startswith("Full-time staff receive 25 days")
    assert parsed.blocks[2].text.endswith("after the absence.")


def test_a_line_repeated_at_the_top_of_most_pages_is_furniture_digits_aside():
    names = ["Scope", "Leave", "Pay"]
    pages = [
        f"Acme Ltd - Report {2023 + n}\nAbout {name}\n{FULL}\nMore on {name}.\n{n}"
        for n, name in enumerate(names, start=1)
    ]

    lines = pages_lines(pages)

    assert lines == [[f"About {name}", FULL, f"More on {name}."] for name in names]


def test_a_single_page_keeps_its_lines_but_not_its_page_number():
    assert pages_lines([f"Title line\n{FULL}\n- 1 -"]) == [["Title line", FULL]]


@pytest.mark.parametrize(
    ("line", "heading"),
    [
        ("5. Meals and subsistence", True),
        ("4.1 Trains", True),
        ("Northwind Analytics Expenses and Travel Policy", True),
        ("Meals and subsistence", True),
        ("the rest of a sentence wrapped", False),  # no capital: a paragraph's last line
        ("It is paid within five days.", False),  # ends as a sentence does
        ("The limits are:", False),  # introduces what follows
        ("- Laptops and monitors", False),  # a bullet
        (FULL[:-10], False),  # as long as a full line
        ("One Two Three Four Five Six Seven Eight Nine Ten Eleven Twelve Thirteen", False),
    ],
)
def test_heading_lines_are_short_capitalised_and_not_sentences(line, heading):
    assert is_heading_line(line, full=len(FULL) * 2 if line.startswith("One") else len(FULL)) is (
        heading
    )


def test_heading_levels_follow_the_numbering():
    assert [heading_level(h) for h in ["Policy", "5. Meals", "4.1 Trains", "4.1.2 Rail"]] == [
        1,
        2,
        3,
        4,
    ]


def test_a_heading_after_a_full_line_ending_a_sentence_ends_the_paragraph():
    lines = [FULL, FULL, "6. Client entertainment", FULL, "short end."]

    assert list(pdf_paragraphs(lines)) == [
        ("paragraph", f"{FULL} {FULL}"),
        ("heading", "6. Client entertainment"),
        ("paragraph", f"{FULL} short end."),
    ]


def test_a_short_line_inside_a_paragraph_is_not_a_heading():
    lines = [FULL.replace(".", ","), "London Paddington", FULL]

    assert list(pdf_paragraphs(lines)) == [
        ("paragraph", f"{FULL.replace('.', ',')} London Paddington"),
        ("paragraph", FULL),
    ]
