"""Every zip-based file is checked by the sizes its zip declares before any parser opens it:
a .pptx, .xlsx or .docx "zip bomb" (a few megabytes that would inflate to gigabytes) fails at
once with a readable error, and so would a file of a format added later, whatever its parser.
The hostile files are built here, from real files and `documents.zip_bomb`."""

from __future__ import annotations

import io
import re
import time
import zipfile
from pathlib import Path

import pytest

from knowledge import parsers
from knowledge.models import Document
from knowledge.parsers import DocumentParseError, document_parse
from knowledge.services import document_ingest
from tests.support import documents
from tests.support.spreadsheets import deck_pptx, inventory_xlsx

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def real_files(tmp_path_factory) -> dict[str, bytes]:
    folder = tmp_path_factory.mktemp("zip-bases")
    return {
        ".pptx": deck_pptx(folder / "deck.pptx").read_bytes(),
        ".xlsx": inventory_xlsx(folder / "inventory.xlsx").read_bytes(),
        ".docx": documents.docx_bytes(),
    }


# The part a reader opens first: the bomb replaces it.
BOMB_PARTS = {
    ".pptx": "ppt/slides/slide1.xml",
    ".xlsx": "xl/worksheets/sheet1.xml",
    ".docx": "word/document.xml",
}


@pytest.mark.parametrize("suffix", sorted(BOMB_PARTS))
def test_a_zip_bomb_fails_with_a_readable_error_before_its_reader_opens_it(
    suffix, real_files, monkeypatch
):
    data = documents.zip_bomb(real_files[suffix], BOMB_PARTS[suffix], megabytes=1536)
    assert len(data) < 3 * 2**20
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
    message = str(caught.value)
    assert "zip bomb" in message and "the limit is 256 MB" in message
    assert re.search(r"would unpack to 1,53\d MB", message)  # the bomb and the real parts


def test_a_format_added_later_gets_the_check_without_asking_for_it(real_files, monkeypatch):
    """A parser registered for a new zip-based extension (as .odt and .ods parsers are) is
    never handed a zip bomb: the check goes by the file's bytes, not by its parser."""
    called: list[bytes] = []
    monkeypatch.setitem(parsers.SUPPORTED_TYPES, ".zzz", "application/x-zzz")
    monkeypatch.setitem(parsers.PARSERS, ".zzz", lambda data, builder: called.append(data))
    data = documents.zip_bomb(real_files[".docx"], "content.xml", megabytes=512)

    with pytest.raises(DocumentParseError, match="zip bomb"):
        document_parse(data=data, name="minutes.zzz")
    assert called == []


def test_a_part_compressed_far_beyond_a_documents_ratio_is_refused_in_a_presentation(
    real_files,
):
    archive = io.BytesIO(real_files[".pptx"])
    with zipfile.ZipFile(archive, "a", zipfile.ZIP_DEFLATED) as target:
        target.writestr("ppt/media/padding.xml", bytes(64 * 2**20))  # 64 MiB → 64 kB
    with pytest.raises(DocumentParseError, match=r"padding\.xml is compressed .* to 1"):
        document_parse(data=archive.getvalue(), name="padded.pptx")


def test_too_many_parts_are_refused(real_files):
    archive = io.BytesIO(real_files[".xlsx"])
    with zipfile.ZipFile(archive, "a", zipfile.ZIP_STORED) as target:
        for number in range(parsers.ZIP_MAX_PARTS + 1):
            target.writestr(f"xl/media/{number}.bin", b"")
    with pytest.raises(DocumentParseError, match="too many parts"):
        document_parse(data=archive.getvalue(), name="many.xlsx")


@pytest.mark.parametrize("suffix", sorted(BOMB_PARTS))
def test_ordinary_zip_based_files_still_parse(suffix, real_files):
    assert document_parse(data=real_files[suffix], name=f"fine{suffix}").blocks


def test_an_ingested_pptx_bomb_leaves_a_failed_document_not_a_processing_one(
    real_files, tmp_path: Path
):
    path = tmp_path / "board-deck.pptx"
    path.write_bytes(documents.zip_bomb(real_files[".pptx"], BOMB_PARTS[".pptx"]))

    outcome = document_ingest(path=path)

    assert outcome.action == "failed"
    document = Document.objects.get(source=str(path.resolve()))
    assert document.status == Document.Status.FAILED
    assert "zip bomb" in document.error and re.search(r"unpack to 2,04\d MB", document.error)
    assert not document.chunks.exists()
