"""OpenDocument text and spreadsheets (.odt, .ods) read like their Office counterparts: the
files LibreOffice wrote from the Word and Excel test files give the same blocks, sections,
sheets and cells; pages follow the page breaks; LibreOffice's padding rows and columns cost
nothing; the spreadsheet budgets and the zip checks apply; answers cite an .odt by page and
section and an .ods by sheet and cells."""

from __future__ import annotations

import io
import time
import zipfile

import pytest
from asgiref.sync import sync_to_async

from knowledge.parsers import DocumentParseError, document_parse
from knowledge.services import document_ingest
from tests.support import documents
from tests.support.answers import collect
from tests.support.opendocument import FILES, cell, ods_bytes, odt_bytes, row
from tests.support.spreadsheets import QX_2207_ROW, SAFETY_QUESTION, inventory_xlsx


def test_an_odt_reads_like_the_word_document_it_was_saved_from():
    word = document_parse(data=documents.docx_bytes(), name="handbook.docx")
    odt = document_parse(data=(FILES / "handbook.odt").read_bytes(), name="handbook.odt")

    assert [(b.text, b.section) for b in odt.blocks] == [(b.text, b.section) for b in word.blocks]
    assert odt.title == word.title == "Expense Policy"
    assert ("Up to 500 pounds | Line manager", "Expense Policy > Approvals") in [
        (b.text, b.section) for b in odt.blocks
    ]
    assert odt.media_type == "application/vnd.oasis.opendocument.text"


def test_an_odt_block_has_the_page_its_page_breaks_put_it_on():
    odt = document_parse(data=(FILES / "leave-policy.odt").read_bytes(), name="leave-policy.odt")

    assert [(b.page, b.section) for b in odt.blocks] == [
        (1, "Annual leave"),
        (2, "Parental leave"),
        (3, "Jury service"),
    ]
    assert odt.title == "Leave policy"


def test_odt_paragraphs_read_as_written_lists_spaces_and_breaks_included_notes_left_out():
    body = (
        '<text:h text:outline-level="1">Claims</text:h>'
        '<text:p>Submit<text:s text:c="3"/>claims<text:tab/>within <text:span>30 days'
        "</text:span><text:note><text:note-citation>1</text:note-citation><text:note-body>"
        "<text:p>FOOTNOTE-NOT-READ</text:p></text:note-body></text:note>.</text:p>"
        "<text:list><text:list-item><text:p>Attach receipts.</text:p></text:list-item>"
        "<text:list-item><text:p>Name the project.</text:p></text:list-item></text:list>"
        '<text:section text:name="s1"><text:h text:outline-level="2">Late claims</text:h>'
        "<text:p>Claims older than 90 days are <text:soft-page-break/>rejected.</text:p>"
        "<text:p>Appeal to the finance director.</text:p></text:section>"
        '<text:p text:style-name="P1">A new page begins here.</text:p>'
    )
    styles = (
        '<style:style style:name="P1" style:family="paragraph">'
        '<style:paragraph-properties fo:break-before="page"/></style:style>'
    )

    parsed = document_parse(data=odt_bytes(body, styles=styles), name="claims.odt")

    assert [(b.page, b.section, b.text) for b in parsed.blocks] == [
        (1, "Claims", "Submit claims within 30 days."),
        (1, "Claims", "Attach receipts."),
        (1, "Claims", "Name the project."),
        (1, "Claims > Late claims", "Claims older than 90 days are rejected."),
        (2, "Claims > Late claims", "Appeal to the finance director."),
        (3, "Claims > Late claims", "A new page begins here."),
    ]
    assert "FOOTNOTE" not in parsed.text
    assert parsed.title == "Claims"


def test_an_ods_saved_by_libreoffice_reads_like_the_xlsx_it_came_from(tmp_path):
    xlsx = document_parse(
        data=inventory_xlsx(tmp_path / "inventory.xlsx").read_bytes(), name="inventory.xlsx"
    )
    started = time.monotonic()
    ods = document_parse(data=(FILES / "inventory.ods").read_bytes(), name="inventory.ods")
    seconds = time.monotonic() - started

    # Row 8's last cell is a formula: openpyxl wrote no value for it, LibreOffice computed one.
    assert [(b.text, b.sheet, b.cells) for b in ods.blocks if b.cells != "A8:E8"] == [
        (b.text, b.sheet, b.cells) for b in xlsx.blocks if b.cells != "A8:E8"
    ]
    assert QX_2207_ROW in [b.text for b in ods.blocks]
    assert ods.metadata["sheets"] == xlsx.metadata["sheets"]  # hidden "Archive" included
    assert [s["hidden"] for s in ods.metadata["sheets"]] == [False, False, True]
    assert seconds < 2  # its 1,048,567 padding rows were never expanded


def test_padding_rows_and_columns_are_skipped_and_a_sheet_ends_at_its_last_cell():
    data = ods_bytes(
        row(cell("Code"), cell("Owner"), cell(repeat=16382)),
        row(cell("AB-1"), cell("Finance"), cell(repeat=16382)),
        row(cell(repeat=16384), repeat=1_048_000),
        row(cell(), cell("late note"), cell(repeat=16382)),
        row(cell(repeat=16384), repeat=500),
        name="Register",
    )

    started = time.monotonic()
    parsed = document_parse(data=data, name="register.ods")

    assert time.monotonic() - started < 2
    assert [(b.text, b.cells) for b in parsed.blocks] == [
        ("Register — Code: AB-1 · Owner: Finance", "A2:B2"),
        ("Register — Owner: late note", "A1048003:B1048003"),
    ]


def test_a_repeated_row_holding_data_counts_against_the_row_budget(settings):
    settings.SPREADSHEET_MAX_ROWS = 1000
    data = ods_bytes(row(cell("Code"), cell("Owner")), row(cell("X"), cell("Y"), repeat=10**9))

    started = time.monotonic()
    with pytest.raises(DocumentParseError, match="more than 1,000 rows with data"):
        document_parse(data=data, name="repeated.ods")
    assert time.monotonic() - started < 2


def test_the_cell_budget_applies_to_ods_as_to_xlsx(settings):
    settings.SPREADSHEET_MAX_CELLS = 100
    data = ods_bytes(row(cell("Code"), cell("Owner")), row(cell("X", repeat=60), repeat=3))

    with pytest.raises(DocumentParseError, match="more than 100 filled cells"):
        document_parse(data=data, name="wide.ods")


def test_a_cell_repeated_past_the_sheet_width_is_refused_before_it_is_expanded():
    data = ods_bytes(row(cell("Code"), cell("X", repeat=10**9)))

    with pytest.raises(DocumentParseError, match="wider than 16,384 columns"):
        document_parse(data=data, name="bomb.ods")


@pytest.mark.parametrize("name", ["bomb.ods", "bomb.odt"])
def test_a_zip_bomb_part_is_refused_before_it_is_unpacked(name):
    data = ods_bytes(row(cell("Code")), extra={"Pictures/bomb.xml": bytes(20 * 2**20)})

    with pytest.raises(DocumentParseError, match="zip bomb"):
        document_parse(data=data, name=name)


@pytest.mark.parametrize("name", ["broken.ods", "broken.odt"])
def test_a_damaged_opendocument_file_is_a_readable_error(name):
    with pytest.raises(DocumentParseError, match="damaged"):
        document_parse(data=b"PK\x03\x04 not really a zip", name=name)
    cut = (FILES / "handbook.odt").read_bytes()[:3000]
    with pytest.raises(DocumentParseError, match="damaged"):
        document_parse(data=cut, name=name)


def test_a_zip_without_content_is_not_taken_for_an_opendocument_file():
    data = ods_bytes(row(cell("Code")))
    with zipfile.ZipFile(io.BytesIO(data)) as source:
        mimetype = source.read("mimetype")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("mimetype", mimetype)

    with pytest.raises(DocumentParseError, match="not an .ods file"):
        document_parse(data=buffer.getvalue(), name="empty.ods")


# --- Ingested, asked about, cited --------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_an_ods_answer_cites_its_sheet_and_cells(tmp_path, staff_user):
    path = tmp_path / "inventory.ods"
    path.write_bytes((FILES / "inventory.ods").read_bytes())
    outcome = await sync_to_async(document_ingest)(path=path)
    assert outcome.action == "new", outcome.error

    events = await collect(user=staff_user, question=SAFETY_QUESTION)

    content = "".join(e.data["text"] for e in events if e.type == "answer_delta")
    citations = next(event for event in events if event.type == "sources").data["citations"]
    assert content.startswith(f"{QX_2207_ROW} [1]")
    first = citations[0]
    assert (first["title"], first["sheet"], first["cells"]) == ("inventory.ods", "Stocks", "A4:E4")


@pytest.mark.django_db(transaction=True)
async def test_an_odt_answer_cites_its_page_and_section(tmp_path, staff_user):
    path = tmp_path / "leave-policy.odt"
    path.write_bytes((FILES / "leave-policy.odt").read_bytes())
    outcome = await sync_to_async(document_ingest)(path=path)
    assert outcome.action == "new", outcome.error

    events = await collect(user=staff_user, question="How many weeks of parental leave?")

    content = "".join(e.data["text"] for e in events if e.type == "answer_delta")
    citations = next(event for event in events if event.type == "sources").data["citations"]
    assert "18 weeks" in content
    first = citations[0]
    expected = ("Leave policy", 2, "Parental leave")
    assert (first["title"], first["page"], first["section"]) == expected
