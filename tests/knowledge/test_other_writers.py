"""Files written by other tools (LibreOffice, XlsxWriter, small writers that lay an .xlsx out
by hand, PDF encryption, CSV in other encodings, damaged files) ingest with their pages,
sheets and sections, or fail with a readable message; one bad file never stops the others.
The files are committed under tests/knowledge/corpus/ (README.md says how each was made), so
these tests need none of the writers."""

from __future__ import annotations

import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from knowledge.models import Document
from knowledge.parsers import DocumentParseError, document_parse

pytestmark = pytest.mark.django_db

CORPUS = Path(__file__).parent / "corpus"
FILES = sorted(
    path for path in CORPUS.iterdir() if path.suffix not in {".py", ".md"} and path.is_file()
)

# What each file that must fail says (part of its message); every other file ingests.
FAILURES = {
    "damaged-not-a-zip.xlsx": "Could not read the spreadsheet: the file is damaged",
    "damaged-truncated.docx": "Could not read the Word document: the file is damaged",
    "damaged-truncated.pdf": "Could not read the PDF: the file is damaged",
    "encrypted-user-password.pdf": "The PDF is password protected.",
    "image-only.pdf": "No text could be extracted",
}

# Rows every workbook of the same source must read the same, whatever wrote it.
STOCK_ROW = (
    "Stock — Product code: QX-2201 · Product name: Brass valve size 1 · Quantity: 10 · "
    "Price: 1,234.50 · Received: 1 March 2026"
)
WORKBOOKS = {
    "xlsxwriter.xlsx": [STOCK_ROW],
    "xlsxwriter-inline-strings.xlsx": [STOCK_ROW],
    "xlsxwriter-1904-dates.xlsx": [STOCK_ROW],
    "libreoffice-calc-ooxml.xlsx": [STOCK_ROW],
    "libreoffice-calc.xlsx": [
        "budget — Cost centre: Travel · Amount: 1250.5 · Approved on: 15 March 2026 · "
        "Owner: Ana Müller"
    ],
    "minimal-inline-strings.xlsx": ["Budget — Cost centre: Office supplies · Amount: 310"],
    "minimal-absolute-paths.xlsx": ["Budget — Cost centre: Office supplies · Amount: 310"],
    "minimal-prefixed-namespace.xlsx": ["Budget — Cost centre: Office supplies · Amount: 310"],
    "minimal-sheet-outside-worksheets.xlsx": [
        "Budget — Cost centre: Office supplies · Amount: 310"
    ],
    "minimal-no-cell-references.xlsx": ["Budget — Cost centre: Travel · Amount: 1250.5"],
    "shared-rich-text-no-styles.xlsx": [
        "Budget — Cost centre: Travel · Amount: 1250.5",
        "Budget — Cost centre: Rent · Amount: 9000",
    ],
    "shared-absolute-paths.xlsx": ["Budget — Cost centre: Travel · Amount: 1250.5"],
    "cell-types-str-e-d-b.xlsx": [
        "Budget — Kind: Error · Value: #N/A",
        "Budget — Kind: Date · Value: 15 March 2026",
        "Budget — Kind: Flag · Value: TRUE",
        "Budget — Kind: Formula · Value: ab",
    ],
    "dates-1904.xlsx": ["Budget — Event: Launch · Day: 16 March 2027"],
    "style-beyond-the-styles.xlsx": ["Budget — Event: Launch · Day: 45000"],
}


def test_the_corpus_is_what_this_file_expects():
    names = {path.name for path in FILES}
    assert set(FAILURES) <= names and set(WORKBOOKS) <= names
    assert len(FILES) >= 30
    assert all(path.stat().st_size < 100_000 for path in FILES)


@pytest.mark.parametrize("name", sorted(WORKBOOKS))
def test_a_workbook_any_writer_wrote_reads_row_by_row_with_its_cells(name):
    parsed = document_parse(data=(CORPUS / name).read_bytes(), name=name)

    texts = [block.text for block in parsed.blocks]
    for row in WORKBOOKS[name]:
        assert row in texts
    assert all(block.sheet and block.cells for block in parsed.blocks)
    assert parsed.metadata["sheets"]


def test_a_workbook_keeps_its_merged_cells_and_its_second_sheet():
    parsed = document_parse(data=(CORPUS / "xlsxwriter.xlsx").read_bytes(), name="x.xlsx")

    merged = next(block for block in parsed.blocks if "Lyon warehouse" in block.text)
    assert (merged.sheet, merged.cells) == ("Stock", "A8:E8")
    assert merged.text.count("Counted by the Lyon warehouse team") == 5  # one per column
    notes = {block.text: block.cells for block in parsed.blocks if block.sheet == "Notes"}
    assert notes == {
        "Notes — Item: Valve QX-2207 brass · Remark: checked twice · Result: #DIV/0!": "A2:C2",
        "Notes — Item: Pump housing · Remark: TRUE · Result: ready to ship": "A3:C3",
    }
    assert [sheet["name"] for sheet in parsed.metadata["sheets"]] == ["Stock", "Notes"]


@pytest.mark.parametrize("name", ["libreoffice-writer.docx", "libreoffice-writer-ooxml.docx"])
def test_a_libreoffice_word_document_has_its_title_and_sections(name):
    parsed = document_parse(data=(CORPUS / name).read_bytes(), name=name)

    assert parsed.title == "Travel policy"
    sections = {block.text: block.section for block in parsed.blocks}
    assert sections["Claim meals up to 35 euros per day; attach the receipts to the claim."] == (
        "Travel policy > Expenses"
    )
    assert sections["Zone | Daily limit"] == "Travel policy > Expenses"


def test_a_libreoffice_presentation_has_its_slides_as_pages():
    parsed = document_parse(
        data=(CORPUS / "libreoffice-impress.pptx").read_bytes(), name="deck.pptx"
    )

    assert parsed.title == "Warehouse review 2026"
    pages = {block.text: (block.page, block.section) for block in parsed.blocks}
    assert pages["Q1 | 42"] == (3, "Deliveries per quarter")
    assert pages["Notes: Mention the supplier change in March."] == (2, "Stock targets")


@pytest.mark.parametrize(
    "name",
    [
        "libreoffice-writer.pdf",
        "encrypted-owner-password-only.pdf",
        "encrypted-rc4-owner-only.pdf",
        "damaged-shifted-offsets.pdf",
    ],
)
def test_a_pdf_that_opens_without_a_password_is_read(name):
    parsed = document_parse(data=(CORPUS / name).read_bytes(), name=name)

    assert "Claim meals up to 35 euros per day" in parsed.text
    assert {block.page for block in parsed.blocks} == {1}


@pytest.mark.parametrize(
    ("name", "row"),
    [
        ("excel-unicode-text-utf16.csv", "Catering · Amount: 480 · Approved on: 2026-04-03"),
        ("utf8-bom-commas.csv", "Owner: Søren Ærø"),
        ("latin1-pipes-cr.csv", "Owner: Zoë Ødegaard"),
        ("libreoffice-cp1252-semicolons.csv", "Owner: José Núñez"),
        ("shift-jis.csv", "品番: QX-2207 · 品名: 真鍮バルブ · 数量: 150"),
    ],
)
def test_csv_in_other_encodings_and_dialects_reads_its_rows(name, row):
    parsed = document_parse(data=(CORPUS / name).read_bytes(), name=name)

    assert any(row in block.text for block in parsed.blocks), [b.text for b in parsed.blocks]
    assert parsed.blocks[0].text.startswith(f"{Path(name).stem} — Cost centre: Travel") or (
        name == "shift-jis.csv"
    )


@pytest.mark.parametrize("name", sorted(FAILURES))
def test_a_file_that_cannot_be_read_fails_with_a_readable_message(name):
    with pytest.raises(DocumentParseError) as caught:
        document_parse(data=(CORPUS / name).read_bytes(), name=name)
    assert FAILURES[name] in str(caught.value)


def test_the_whole_corpus_in_one_ingest_run(tmp_path):
    """Every file in one `ingest` run: the readable ones become ready documents with their
    pages, sheets or sections, the others failed documents with their message, and no file
    stops the others."""
    folder = tmp_path / "from-other-tools"
    folder.mkdir()
    for path in FILES:
        shutil.copy(path, folder / path.name)

    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match=rf"^{len(FAILURES)} file\(s\) failed"):
        call_command("ingest", str(folder), stdout=out, stderr=err)

    documents = {Path(d.source).name: d for d in Document.objects.all()}
    assert set(documents) == {path.name for path in FILES}
    for name, document in documents.items():
        if name in FAILURES:
            assert document.status == Document.Status.FAILED, name
            assert FAILURES[name] in document.error
            continue
        assert document.status == Document.Status.READY, (name, document.error)
        chunks = list(document.chunks.all())
        assert chunks, name
        if name.endswith((".xlsx", ".csv")):
            assert all(chunk.sheet and chunk.cells for chunk in chunks), name
        elif name.endswith((".pdf", ".pptx")):
            assert all(chunk.page for chunk in chunks), name
        else:
            assert all(chunk.section for chunk in chunks), name
    assert f"{len(FILES) - len(FAILURES)} new, 0 updated, 0 unchanged, {len(FAILURES)} failed" in (
        out.getvalue()
    )


# --- Word content that python-docx's paragraphs leave out ------------------------------------

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def word_document_with_wrapped_content() -> bytes:
    """A .docx (python-docx) whose text sits where Word, Google Docs and templates put it: a
    tracked insertion, a block content control (a template's field), an inline content
    control, a hyperlink, a text box in a drawing, and a table of contents (left out)."""
    import io

    import docx
    from lxml import etree

    document = docx.Document()
    document.add_heading("Leave policy", level=1)
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text = "Part-time staff"
    table.cell(0, 1)._tc.append(
        etree.fromstring(
            f"<w:p xmlns:w='{W}'><w:ins w:id='3' w:author='HR'><w:r><w:t>pro rata</w:t></w:r>"
            "</w:ins></w:p>"
        )
    )
    body = document.element.body
    sect = body[-1]

    def xml(text: str):
        return etree.fromstring(
            f'<root xmlns:w="{W}" xmlns:mc="http://schemas.openxmlformats.org/'
            f'markup-compatibility/2006">{text}</root>'
        )[0]

    for fragment in [
        "<w:p><w:r><w:t>Annual leave is </w:t></w:r><w:ins w:id='1' w:author='HR'><w:r>"
        "<w:t>twenty-five</w:t></w:r></w:ins><w:del w:id='2' w:author='HR'><w:r><w:delText>"
        "twenty</w:delText></w:r></w:del><w:r><w:t xml:space='preserve'> days a year.</w:t>"
        "</w:r></w:p>",
        "<w:sdt><w:sdtPr><w:docPartObj><w:docPartGallery w:val='Table of Contents'/>"
        "</w:docPartObj></w:sdtPr><w:sdtContent><w:p><w:r><w:t>Contents page entry 3</w:t>"
        "</w:r></w:p></w:sdtContent></w:sdt>",
        "<w:sdt><w:sdtPr><w:alias w:val='Owner'/></w:sdtPr><w:sdtContent><w:p><w:r><w:t>"
        "The policy owner is the Lyon people team.</w:t></w:r></w:p></w:sdtContent></w:sdt>",
        "<w:p><w:r><w:t xml:space='preserve'>Carry-over needs </w:t></w:r><w:sdt><w:sdtContent>"
        "<w:r><w:t>written approval</w:t></w:r></w:sdtContent></w:sdt><w:hyperlink><w:r><w:t>"
        " from a director</w:t></w:r></w:hyperlink><w:r><w:t>.</w:t></w:r></w:p>",
        "<w:p><w:r><w:t>See the box.</w:t></w:r><w:r><mc:AlternateContent><mc:Choice "
        "Requires='wps'><w:drawing><w:txbxContent><w:p><w:r><w:t>Boxed: sick leave needs a "
        "note after three days.</w:t></w:r></w:p></w:txbxContent></w:drawing></mc:Choice>"
        "<mc:Fallback><w:pict><w:txbxContent><w:p><w:r><w:t>Boxed: sick leave needs a note "
        "after three days.</w:t></w:r></w:p></w:txbxContent></w:pict></mc:Fallback>"
        "</mc:AlternateContent></w:r></w:p>",
    ]:
        sect.addprevious(xml(fragment))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_word_text_in_tracked_changes_content_controls_and_text_boxes_is_read():
    parsed = document_parse(data=word_document_with_wrapped_content(), name="leave.docx")

    texts = [block.text for block in parsed.blocks]
    assert texts == [
        "Part-time staff | pro rata",
        "Annual leave is twenty-five days a year.",
        "The policy owner is the Lyon people team.",
        "Carry-over needs written approval from a director.",
        "See the box.",
        "Boxed: sick leave needs a note after three days.",
    ]
    assert {block.section for block in parsed.blocks} == {"Leave policy"}


# --- Decks other writers lay out -------------------------------------------------------------


def test_a_deck_with_shapes_python_pptx_cannot_classify_is_read():
    """A text shape with neither a preset geometry nor the text-box flag (as some writers lay
    them out), and a shape python-pptx has no class for: their text is still read."""
    import io

    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Safety"
    box = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(6), Inches(1))
    box.text_frame.text = "Wear gloves when handling brass valves."
    sp = box._element
    sp.nvSpPr.cNvSpPr.attrib.pop("txBox")
    sp.spPr.remove(sp.spPr.prstGeom)
    out = io.BytesIO()
    deck.save(out)

    parsed = document_parse(data=out.getvalue(), name="safety.pptx")

    assert [(b.text, b.page, b.section) for b in parsed.blocks] == [
        ("Wear gloves when handling brass valves.", 1, "Safety")
    ]


def test_a_deck_missing_a_slide_part_is_read_without_it():
    parsed = document_parse(
        data=(CORPUS / "damaged-missing-slide.pptx").read_bytes(), name="deck.pptx"
    )

    assert {block.page for block in parsed.blocks} == {1, 3}
    assert "Q1 | 42" in parsed.text


# --- PDF pages pypdf cannot read -------------------------------------------------------------


def test_a_pdf_page_pypdf_fails_on_leaves_the_other_pages(monkeypatch):
    from pypdf import PageObject

    real = PageObject.extract_text

    def extract_text(page, *args, **kwargs):
        if page.page_number == 1:
            raise KeyError("/Widths")  # as pypdf raises on some fonts of some producers
        return real(page, *args, **kwargs)

    monkeypatch.setattr(PageObject, "extract_text", extract_text)
    data = (CORPUS / "libreoffice-impress.pdf").read_bytes()

    parsed = document_parse(data=data, name="deck.pdf")

    assert {block.page for block in parsed.blocks} == {1, 3}
    assert "Deliveries per quarter" in parsed.text


def test_a_pdf_whose_every_page_fails_says_it_is_damaged(monkeypatch):
    from pypdf import PageObject

    def extract_text(page, *args, **kwargs):
        raise KeyError("/Widths")

    monkeypatch.setattr(PageObject, "extract_text", extract_text)
    data = (CORPUS / "libreoffice-impress.pdf").read_bytes()

    with pytest.raises(DocumentParseError, match=r"damaged .*KeyError: '/Widths'"):
        document_parse(data=data, name="deck.pdf")
