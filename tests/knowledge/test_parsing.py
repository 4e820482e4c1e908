"""Parsers on real files: text, page numbers, heading paths, offsets, readable errors."""

from __future__ import annotations

import pytest

from knowledge.parsers import (
    DocumentParseError,
    ParsedDocument,
    UnsupportedFileType,
    document_parse,
)
from tests.support import documents


def parse(path) -> ParsedDocument:
    return document_parse(data=path.read_bytes(), name=path.name)


def block_with(parsed: ParsedDocument, words: str):
    matches = [block for block in parsed.blocks if words in block.text]
    assert matches, f"no block contains {words!r}"
    return matches[0]


@pytest.mark.parametrize("kind", ["pdf", "docx", "md", "html", "txt"])
def test_block_offsets_point_into_the_extracted_text(sample_files, kind):
    parsed = parse(sample_files[kind])

    assert parsed.blocks
    for block in parsed.blocks:
        assert parsed.text[block.char_start : block.char_end] == block.text
        assert block.text == block.text.strip()
    starts = [block.char_start for block in parsed.blocks]
    assert starts == sorted(starts)


def test_pdf_blocks_carry_their_page_numbers(sample_files):
    parsed = parse(sample_files["pdf"])

    assert parsed.media_type == "application/pdf"
    assert parsed.title == documents.PDF_TITLE
    assert {block.page for block in parsed.blocks} == {1, 2, 3}
    assert block_with(parsed, "travel portal at least 14 days").page == 1
    assert block_with(parsed, "Claims older than 90 days").page == 2
    assert block_with(parsed, "45 pence per mile").page == 3
    assert all(block.section is None for block in parsed.blocks)


def test_pdf_lines_are_joined_back_into_paragraphs(sample_files):
    parsed = parse(sample_files["pdf"])

    paragraph = block_with(parsed, "Private car mileage")
    assert "Record the start and end postcode of every journey in the mileage log." in (
        paragraph.text
    )
    assert "\n" not in paragraph.text


def test_markdown_sections_are_heading_paths(sample_files):
    parsed = parse(sample_files["md"])

    assert parsed.title == "Handbook"
    assert block_with(parsed, "Welcome to the staff handbook").section == "Handbook"
    assert block_with(parsed, "25 days").section == "Handbook > Leave > Annual leave"
    assert block_with(parsed, "doctor's note").section == "Handbook > Leave > Sick leave"
    assert block_with(parsed, "within 30 days").section == "Handbook > Expenses"


def test_markdown_code_fence_lines_are_not_headings(sample_files):
    parsed = parse(sample_files["md"])

    code = block_with(parsed, "# Not a heading")
    assert code.section == "Handbook > Leave > Annual leave"
    assert "request_leave(days=5)" in code.text
    assert not any("Not a heading" in (block.section or "") for block in parsed.blocks)


def test_markdown_markup_becomes_plain_text(sample_files):
    parsed = parse(sample_files["md"])

    assert "get 25 days of annual leave" in parsed.text  # **25 days** without asterisks
    assert "Read the finance guide for details." in parsed.text  # link text, no URL
    assert "- Submit claims within 30 days.\n- Attach an itemised receipt." in parsed.text
    assert "Hotel | 150 pounds" in parsed.text
    assert block_with(parsed, "Hotel | 150 pounds").section == "Handbook > Expenses"


def test_html_drops_scripts_styles_and_navigation(sample_files):
    parsed = parse(sample_files["html"])

    for hidden in ("SCRIPT-SHOULD-NOT-APPEAR", "secret-style", "NAV-HOME", "NAV-ABOUT"):
        assert hidden not in parsed.text
    assert parsed.title == "IT Security"
    assert parsed.media_type == "text/html"


def test_html_sections_are_heading_paths(sample_files):
    parsed = parse(sample_files["html"])

    assert block_with(parsed, "keep company systems safe").section == "IT Security"
    assert block_with(parsed, "14 characters").section == "IT Security > Passwords"
    assert block_with(parsed, "Bitwarden").section == "IT Security > Passwords > Password manager"
    assert block_with(parsed, "five minutes").section == "IT Security > Devices"
    assert block_with(parsed, "lost laptop").section == "IT Security > Devices"
    assert block_with(parsed, "Laptop | BitLocker").section == "IT Security > Devices"
    assert "Use at least 14 characters. Never reuse" in parsed.text


def test_docx_heading_styles_build_sections_and_tables_are_included(sample_files):
    parsed = parse(sample_files["docx"])

    assert parsed.title == "Expense Policy"
    assert block_with(parsed, "which business costs").section == "Expense Policy"
    assert block_with(parsed, "150 pounds a night").section == "Expense Policy > Travel > Hotels"
    assert block_with(parsed, "40 pounds a day").section == "Expense Policy > Travel > Meals"
    assert block_with(parsed, "Line manager").section == "Expense Policy > Approvals"
    assert "Up to 500 pounds | Line manager" in parsed.text
    assert "Above | Director" in parsed.text
    assert all(block.page is None for block in parsed.blocks)


def test_latin1_text_is_decoded_correctly(sample_files):
    parsed = parse(sample_files["txt"])

    assert "crème brûlée, pâté and crêpes" in parsed.text
    assert "Señor García" in parsed.text
    assert parsed.media_type == "text/plain"
    assert block_with(parsed, "crème brûlée").section == "CAFÉ AND KITCHEN RULES"
    assert "CAFÉ AND KITCHEN RULES" not in parsed.text  # the heading is the section


def test_utf8_text_with_byte_order_mark_is_decoded():
    parsed = document_parse(data="\ufeffNaïve café prices.".encode(), name="notes.txt")

    assert parsed.text == "Naïve café prices."


@pytest.mark.parametrize("name", ["report.xls", "slides.ppt", "README", "archive.tar.gz"])
def test_unsupported_type_is_refused_naming_the_supported_types(name):
    with pytest.raises(UnsupportedFileType) as caught:
        document_parse(data=b"some content", name=name)

    message = str(caught.value)
    assert name.split(".")[0] in message
    for supported in [
        ".pdf",
        ".md",
        ".markdown",
        ".html",
        ".htm",
        ".txt",
        ".docx",
        ".xlsx",
        ".csv",
        ".pptx",
    ]:
        assert supported in message


@pytest.mark.parametrize("name", ["empty.pdf", "empty.md", "empty.html", "empty.txt", "e.docx"])
def test_empty_file_is_a_readable_error(name):
    with pytest.raises(DocumentParseError, match="empty"):
        document_parse(data=b"", name=name)
    with pytest.raises(DocumentParseError, match="empty"):
        document_parse(data=b"  \n\n ", name=name)


def test_corrupt_pdf_is_a_readable_error():
    broken = documents.pdf_bytes()[:400]

    with pytest.raises(DocumentParseError, match="Could not read the PDF"):
        document_parse(data=broken, name="broken.pdf")
    with pytest.raises(DocumentParseError, match="Could not read the PDF"):
        document_parse(data=b"this is not a pdf at all", name="fake.pdf")


def test_corrupt_docx_is_a_readable_error():
    with pytest.raises(DocumentParseError, match="Could not read the Word document"):
        document_parse(data=b"PK\x03\x04 truncated zip", name="broken.docx")
    with pytest.raises(DocumentParseError, match="Could not read the Word document"):
        document_parse(data=documents.docx_bytes()[:1000], name="cut.docx")


def test_binary_data_named_txt_is_refused():
    with pytest.raises(DocumentParseError, match="does not look like text"):
        document_parse(data=bytes(range(256)) * 4, name="image.txt")


def test_document_with_only_markup_and_no_text_is_refused():
    html = b"<html><head><script>x()</script></head><body><nav>Menu</nav></body></html>"

    with pytest.raises(DocumentParseError, match="No text could be extracted"):
        document_parse(data=html, name="menu.html")


def test_pdf_without_text_is_refused():
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.rect(10, 10, 50, 50)  # a drawing: no text layer, and nothing OCR can read on it

    with pytest.raises(DocumentParseError, match="No text could be extracted from scan.pdf"):
        document_parse(data=bytes(pdf.output()), name="scan.pdf")


@pytest.mark.parametrize("encoding", ["cp1251", "koi8_r"])
def test_cyrillic_legacy_encodings_are_decoded_too(encoding):
    text = (
        "Сотрудники получают двадцать пять дней ежегодного отпуска. Заявление подаётся "
        "руководителю за две недели до начала отпуска. Больничный оформляется в первый день."
    )

    parsed = document_parse(data=text.encode(encoding), name="otpusk.txt")

    assert parsed.text == text
