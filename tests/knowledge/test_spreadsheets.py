"""Spreadsheets (.xlsx, .csv) and slides (.pptx): parsing, chunking and ingestion on real files
written by openpyxl, csv and python-pptx, real PostgreSQL and the real embedding model."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings

from knowledge import embedding
from knowledge.access import OPERATOR
from knowledge.chunking import MAX_TOKENS, chunks_build
from knowledge.models import Chunk, Document
from knowledge.parsers import DocumentParseError, document_parse
from knowledge.parsers.cells import number_text, range_union, value_text
from knowledge.retrieval import chunks_search
from knowledge.services import document_ingest, documents_ingest
from tests.support.spreadsheets import (
    PX_11_ROW,
    QX_2207_ROW,
    deck_pptx,
    inventory_xlsx,
    numbered_csv,
    price_list_csv,
)


@pytest.fixture
def inventory(tmp_path):
    return inventory_xlsx(tmp_path / "inventory.xlsx")


@pytest.fixture
def price_list(tmp_path):
    return price_list_csv(tmp_path / "price-list.csv")


def blocks_of(path):
    parsed = document_parse(data=path.read_bytes(), name=path.name)
    return parsed, [(block.sheet, block.cells, block.text) for block in parsed.blocks]


# --- Parsing -----------------------------------------------------------------------------


def test_xlsx_rows_name_their_sheet_and_header_and_keep_their_cells(inventory):
    parsed, blocks = blocks_of(inventory)

    assert parsed.title == "inventory.xlsx"
    assert blocks == [
        ("Stocks", "A1:E1", "Stocks — Warehouse stock — Lyon"),  # the caption, once
        ("Stocks", "A4:E4", QX_2207_ROW),
        (
            "Stocks",
            "A5:E5",
            "Stocks — Product code: QX-2208 · Product name: Brass valve 3/4in · Quantity in "
            "stock: 80 · Safety stock: 60 · Last delivery: 2 February 2026",
        ),
        (
            "Stocks",
            "A6:E6",
            "Stocks — Product code: QX-3100 · Product name: Stainless elbow 90° · Quantity in "
            "stock: 420 · Safety stock: 100 · Last delivery: 20 January 2026 14:30",
        ),
        # Row 7 is empty; row 8's formula has no cached value, so it shows nothing.
        (
            "Stocks",
            "A8:E8",
            "Stocks — Product code: QX-4410 · Product name: Clapet anti-retour Ø25 — Bördel · "
            "Quantity in stock: 35 · Safety stock: 40",
        ),
        # A two-row header with merged cells; currency, thousands and percent formats.
        (
            "Suppliers",
            "A3:D3",
            "Suppliers — Supplier: Laiton & Fils · Price EUR: 12.50 € · Price USD: $13.75 · "
            "Discount: 12.5%",
        ),
        (
            "Suppliers",
            "A4:D4",
            "Suppliers — Supplier: Nordic Fittings AB · Price EUR: 1,234.50 € · Price USD: "
            "$1,300.00 · Discount: 5.0%",
        ),
        ("Archive", "A2:B2", "Archive — Code: QX-1000 · Note: Discontinued in 2024"),
    ]
    assert "=SUM" not in parsed.text
    sheets = {sheet["name"]: sheet for sheet in parsed.metadata["sheets"]}
    assert set(sheets) == {"Stocks", "Suppliers", "Archive"}  # the empty sheet is skipped
    assert sheets["Archive"]["hidden"] is True and sheets["Stocks"]["hidden"] is False
    assert sheets["Stocks"]["labels"][:2] == ["Product code", "Product name"]
    assert sheets["Stocks"]["columns"] == ["A", "B", "C", "D", "E"]
    assert sheets["Suppliers"]["header"] == "A1:D2"


def test_semicolon_separated_cp1252_csv_is_decoded_and_split(price_list):
    parsed, blocks = blocks_of(price_list)

    assert parsed.title == "price-list.csv"
    assert blocks[1] == ("price-list", "A3:D3", PX_11_ROW)
    assert blocks[2][1] == "A5:D5"  # after the empty row 4
    assert "€" in parsed.text and "Société" in parsed.text


def test_a_comma_separated_utf8_csv_with_quotes_is_read_too(tmp_path):
    path = tmp_path / "contacts.csv"
    path.write_text('Name,Role,Phone\n"Dupont, Anne",Buyer,+33 4 72 00 00 00\n', "utf-8")

    _, blocks = blocks_of(path)

    assert blocks == [
        (
            "contacts",
            "A2:C2",
            "contacts — Name: Dupont, Anne · Role: Buyer · Phone: +33 4 72 00 00 00",
        )
    ]


@pytest.mark.parametrize(
    ("value", "number_format", "shown"),
    [
        (150, "General", "150"),
        (150.0, "General", "150"),
        (0.1 + 0.2, "General", "0.3"),
        (1234.5, "#,##0.00", "1,234.50"),
        (0.125, "0.0%", "12.5%"),
        (12.5, '#,##0.00 "€"', "12.50 €"),
        (99, '"$"#,##0', "$99"),
        (-0.0001, "0.00", "0.00"),
        (189, '"GBP "#,##0.00', "GBP 189.00"),
        (5, "[$€-407] #,##0.00", "€ 5.00"),
        (3, '0" kg"', "3 kg"),
        (-12, "#,##0;[Red]-#,##0", "-12"),
        (7, "@", "7"),
    ],
)
def test_numbers_read_as_their_cell_format_shows_them(value, number_format, shown):
    assert number_text(value, number_format) == shown


def test_dates_and_booleans_read_as_a_person_reads_them():
    import datetime as dt

    assert value_text(dt.date(2026, 3, 15)) == "15 March 2026"
    assert value_text(dt.datetime(2026, 3, 15, 9, 5)) == "15 March 2026 09:05"
    assert value_text(True) == "TRUE"
    assert range_union(["A4:E4", "A6:E6"]) == "A4:E6"


def test_a_damaged_xlsx_is_a_readable_error(tmp_path):
    with pytest.raises(DocumentParseError, match="damaged or not an .xlsx file"):
        document_parse(data=b"PK\x03\x04 not really a zip", name="broken.xlsx")


# --- Chunking and ingestion ----------------------------------------------------------------


@pytest.mark.django_db
def test_ingested_xlsx_chunks_carry_sheet_and_range_and_stop_at_empty_rows(inventory):
    outcome = document_ingest(path=inventory)

    assert outcome.action == "new", outcome.error
    document = outcome.document
    assert document.title == "inventory.xlsx"
    assert document.metadata["sheets"][0]["name"] == "Stocks"
    chunks = list(document.chunks.order_by("index").values_list("sheet", "cells", "text"))
    assert [(sheet, cells) for sheet, cells, _ in chunks] == [
        ("Stocks", "A1:E1"),
        ("Stocks", "A4:E6"),  # rows 4-6 together; the empty row 7 ends the chunk
        ("Stocks", "A8:E8"),
        ("Suppliers", "A3:D4"),
        ("Archive", "A2:B2"),
    ]
    assert chunks[1][2].split("\n")[0] == QX_2207_ROW


@pytest.mark.django_db
def test_a_row_longer_than_the_model_reads_is_cut_within_the_limit(tmp_path):
    from openpyxl import Workbook

    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Notes"
    sheet.append(["Code", "Remark"])
    sheet.append(["QX-9", " ".join(f"remark{n} about the part" for n in range(200))])
    sheet.append(["QX-10", "short"])
    path = tmp_path / "notes.xlsx"
    workbook.save(path)

    parsed = document_parse(data=path.read_bytes(), name=path.name)
    drafts = chunks_build(parsed=parsed)

    assert len(drafts) >= 3
    counts = embedding.token_counts([draft.embedding_input for draft in drafts])
    assert max(counts) <= MAX_TOKENS
    assert {draft.cells for draft in drafts[:-1]} == {"A2:B2"}
    assert drafts[-1].text.endswith("Remark: short") and drafts[-1].cells == "A3:B3"


@pytest.mark.django_db
def test_product_codes_are_found_by_full_text_search(inventory, price_list):
    for path in (inventory, price_list):
        assert document_ingest(path=path).action == "new"

    for query, row in (("QX-2207", QX_2207_ROW), ("PX-11", PX_11_ROW)):
        result = chunks_search(reader=OPERATOR, query=query, mode="lexical", top_k=3)
        assert row in result.chunks[0].text.split("\n")
        assert result.chunks[0].sheet in {"Stocks", "price-list"}


@pytest.mark.django_db
def test_a_spreadsheet_beyond_the_limits_fails_cleanly_while_the_others_ingest(
    tmp_path, inventory, price_list
):
    big = numbered_csv(tmp_path / "all-parts.csv", rows=60, columns=1)  # 61 rows, 61 cells
    wide = numbered_csv(tmp_path / "wide.csv", rows=5, columns=30)  # 6 rows, 180 cells

    started = time.monotonic()
    with override_settings(SPREADSHEET_MAX_ROWS=50, SPREADSHEET_MAX_CELLS=100):
        outcomes = documents_ingest(paths=[tmp_path], title=None, enabled=True, dry_run=False)
    took = time.monotonic() - started

    by_name = {outcome.source.rsplit("/", 1)[-1]: outcome for outcome in outcomes}
    assert by_name["all-parts.csv"].action == "failed"
    assert "more than 50 rows with data" in by_name["all-parts.csv"].error
    assert "Split it into smaller files" in by_name["all-parts.csv"].error
    assert by_name["wide.csv"].action == "failed"
    assert "more than 100 filled cells" in by_name["wide.csv"].error
    failed = Document.objects.get(source=str(big.resolve()))
    assert failed.status == Document.Status.FAILED and not failed.chunks.exists()
    assert Document.objects.get(source=str(wide.resolve())).status == Document.Status.FAILED
    for path in (inventory, price_list):
        assert by_name[path.name].action == "new"
        assert Document.objects.get(source=str(path.resolve())).status == Document.Status.READY
    assert took < 60


def test_an_xlsx_far_beyond_the_row_limit_fails_fast(tmp_path):
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet("Log")
    for n in range(30_000):
        sheet.append([n, f"entry {n}"])
    path = tmp_path / "log.xlsx"
    workbook.save(path)

    started = time.monotonic()
    with (
        override_settings(SPREADSHEET_MAX_ROWS=1_000),
        pytest.raises(DocumentParseError, match="more than 1,000 rows"),
    ):
        document_parse(data=path.read_bytes(), name=path.name)
    assert time.monotonic() - started < 5  # streaming stops at the limit


# --- Slides ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_pptx_slides_are_pages_and_their_titles_sections(tmp_path):
    path = deck_pptx(tmp_path / "warehouse-review.pptx")

    parsed = document_parse(data=path.read_bytes(), name=path.name)
    assert parsed.title == "Warehouse review 2026"
    assert [(b.page, b.section, b.text) for b in parsed.blocks] == [
        (1, "Warehouse review 2026", "Lyon operations team"),
        (
            2,
            "Stock targets",
            "Brass valves are reordered when stock falls under the safety stock.",
        ),
        (2, "Stock targets", "- The reorder lead time for brass valves is nine working days."),
        (2, "Stock targets", "Notes: Mention the supplier change in March."),
        (3, "Deliveries per quarter", "Quarter | Deliveries"),
        (3, "Deliveries per quarter", "Q1 | 42"),
        (3, "Deliveries per quarter", "Q2 | 57"),
    ]

    outcome = document_ingest(path=path)
    assert outcome.action == "new", outcome.error
    pages = list(outcome.document.chunks.order_by("index").values_list("page", "section"))
    assert pages == [
        (1, "Warehouse review 2026"),
        (2, "Stock targets"),
        (3, "Deliveries per quarter"),
    ]
    assert not Chunk.objects.exclude(sheet=None).exists()
    result = chunks_search(
        reader=OPERATOR, query="What is the lead time for brass valves?", top_k=1
    )
    assert result.chunks[0].page == 2
