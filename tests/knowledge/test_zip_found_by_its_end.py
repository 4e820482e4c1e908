"""A zip is found where zip readers find it, by the end-of-central-directory record near its
end, not by its first four bytes: a zip bomb of any office format with bytes put in front is
refused before its reader opens it, and so is any file of an office extension whatever its
first bytes (docs/decisions/0095-one-zip-check-before-every-parser.md, and 0145). The hostile
files are built here from real ones and `documents.zip_bomb`."""

from __future__ import annotations

import io
import time
import zipfile
from pathlib import Path

import pytest

from knowledge import parsers
from knowledge.parsers import DocumentParseError, document_parse
from knowledge.parsers.archives import is_zip
from tests.support import documents
from tests.support.opendocument import cell, ods_bytes, odt_bytes, row
from tests.support.spreadsheets import deck_pptx, inventory_xlsx

# The part each format's reader opens first: the bomb replaces it.
BOMB_PARTS = {
    ".pptx": "ppt/slides/slide1.xml",
    ".xlsx": "xl/worksheets/sheet1.xml",
    ".docx": "word/document.xml",
    ".odt": "content.xml",
    ".ods": "content.xml",
}


@pytest.fixture(scope="module")
def real_files(tmp_path_factory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("zip-bases")
    return {
        ".pptx": deck_pptx(folder / "deck.pptx").read_bytes(),
        ".xlsx": inventory_xlsx(folder / "inventory.xlsx").read_bytes(),
        ".docx": documents.docx_bytes(),
        ".odt": odt_bytes("<text:p>Leave is 25 days a year.</text:p>"),
        ".ods": ods_bytes(row(cell("Product"), cell("Stock")), row(cell("QX-2207"), cell("200"))),
    }


@pytest.mark.parametrize("suffix", sorted(BOMB_PARTS))
def test_a_zip_bomb_with_one_byte_in_front_is_refused_before_its_reader_opens_it(
    suffix, real_files, monkeypatch
):
    data = b"\x00" + documents.zip_bomb(real_files[suffix], BOMB_PARTS[suffix], megabytes=1536)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:  # zip readers open it
        assert archive.getinfo(BOMB_PARTS[suffix]).file_size == 1536 * 2**20
    opened: list[str] = []
    real_parser = parsers.PARSERS[suffix]
    monkeypatch.setitem(
        parsers.PARSERS, suffix, lambda *a: opened.append(suffix) or real_parser(*a)
    )

    started = time.monotonic()
    with pytest.raises(DocumentParseError) as caught:
        document_parse(data=data, name=f"quarterly{suffix}")

    assert time.monotonic() - started < 5
    assert opened == []
    assert "1 bytes of something else before its content" in str(caught.value)


@pytest.mark.parametrize("suffix", sorted(BOMB_PARTS))
def test_a_harmless_office_file_with_bytes_in_front_is_refused_too(suffix, real_files):
    with pytest.raises(DocumentParseError, match="64 bytes of something else"):
        document_parse(data=bytes(range(64)) + real_files[suffix], name=f"odd{suffix}")


@pytest.mark.parametrize("suffix", sorted(BOMB_PARTS))
def test_ordinary_office_files_still_parse(suffix, real_files):
    assert document_parse(data=real_files[suffix], name=f"fine{suffix}").blocks


def test_a_zip_is_found_by_its_end_not_its_first_bytes(real_files):
    assert is_zip(real_files[".docx"])
    assert is_zip(b"junk in front" + real_files[".docx"])
    assert not is_zip(b"Leave is 25 days a year.")


def test_a_prefixed_zip_bomb_with_any_other_extension_is_checked_by_its_end(
    real_files, monkeypatch
):
    called: list[bytes] = []
    monkeypatch.setitem(parsers.SUPPORTED_TYPES, ".zzz", "application/x-zzz")
    monkeypatch.setitem(parsers.PARSERS, ".zzz", lambda data, builder: called.append(data))
    data = b"#!" + documents.zip_bomb(real_files[".docx"], "content.xml", megabytes=512)

    with pytest.raises(DocumentParseError, match="before its content"):
        document_parse(data=data, name="minutes.zzz")
    assert called == []


def test_a_file_of_an_office_extension_that_is_no_zip_at_all_is_a_readable_error(tmp_path: Path):
    with pytest.raises(DocumentParseError, match=r"not an \.xlsx file"):
        document_parse(data=b"Product,Stock\nQX-2207,200\n", name="stock.xlsx")
