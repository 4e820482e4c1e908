"""Hostile files fail cleanly and fast: a DOCX zip bomb is refused before python-docx unpacks
it, deeply nested HTML is refused beyond the nesting limit and read in linear time below it.
Every hostile file is built here, in the test."""

from __future__ import annotations

import io
import time
import zipfile

import pytest

from knowledge import parsers
from knowledge.models import Document
from knowledge.parsers import HTML_MAX_DEPTH, DocumentParseError, document_parse
from knowledge.services import document_ingest
from tests.support import documents

BLOCK = documents.ZIP_BOMB_BLOCK


def zip_bomb_docx(gigabytes: int = 2) -> bytes:
    """A real .docx (python-docx reads it) plus one part, word/bomb.xml, of `gigabytes` GiB of
    zeros deflated to about 2 MB."""
    return documents.zip_bomb(documents.docx_bytes(), "word/bomb.xml", megabytes=gigabytes * 1024)


def test_the_zip_bomb_is_real():
    data = zip_bomb_docx()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        bomb = archive.getinfo("word/bomb.xml")
        assert bomb.file_size == 2 * 2**30
        with archive.open(bomb) as part:  # the first megabytes really inflate to zeros
            assert part.read(BLOCK + 10) == bytes(BLOCK + 10)
        assert "word/document.xml" in archive.namelist()
    assert len(data) < 5 * 2**20


def test_a_docx_zip_bomb_fails_with_a_readable_error_before_python_docx_reads_it(
    monkeypatch, tmp_path
):
    import docx

    path = tmp_path / "quarterly-report.docx"
    path.write_bytes(zip_bomb_docx())
    opened: list[object] = []
    real = docx.Document
    monkeypatch.setattr(docx, "Document", lambda *a, **k: opened.append(a) or real(*a, **k))

    started = time.monotonic()
    outcome = document_ingest(path=path)

    assert time.monotonic() - started < 10
    assert opened == []
    assert outcome.action == "failed"
    document = Document.objects.get(source=str(path.resolve()))
    assert document.status == Document.Status.FAILED
    assert "zip bomb" in document.error and "2,049 MB" in document.error
    assert not document.chunks.exists()


def test_a_part_compressed_far_beyond_a_documents_ratio_is_refused():
    archive = io.BytesIO(documents.docx_bytes())
    with zipfile.ZipFile(archive, "a", zipfile.ZIP_DEFLATED) as target:
        target.writestr("word/media/padding.xml", bytes(64 * 2**20))  # 64 MiB → 64 kB
    with pytest.raises(DocumentParseError, match="compressed .* to 1"):
        document_parse(data=archive.getvalue(), name="padded.docx")


def test_an_ordinary_docx_still_parses():
    assert document_parse(data=documents.docx_bytes(), name="fine.docx").blocks


pytestmark = pytest.mark.django_db


# --- HTML nesting --------------------------------------------------------------------------------
def nested_html(depth: int, tag: str = "div", closed: bool = True) -> bytes:
    opening = f"<{tag}>" * depth
    closing = f"</{tag}>" * depth if closed else ""
    return f"<html><body><h1>Deep</h1>{opening}The deepest words.{closing}</body></html>".encode()


@pytest.mark.parametrize("closed", [True, False])
def test_html_nested_beyond_the_limit_fails_fast_with_a_clear_error(closed):
    started = time.monotonic()
    with pytest.raises(DocumentParseError, match="nested too deeply"):
        document_parse(data=nested_html(200_000, closed=closed), name="deep.html")
    assert time.monotonic() - started < 3


def test_html_nested_up_to_the_limit_is_read_quickly():
    """Twenty trees nested almost to the limit, block and inline elements alternating: all
    the text is read in well under a few seconds (the walk used to search every inline
    element's subtree for blocks again: quadratic in the depth, about a minute here)."""
    levels = (HTML_MAX_DEPTH - 10) // 2
    tree = "<div><span>a " * levels + "words at the bottom" + "</span></div>" * levels
    data = ("<html><body>" + tree * 20 + "</body></html>").encode()

    started = time.monotonic()
    parsed = document_parse(data=data, name="deep.html")

    assert time.monotonic() - started < 5
    assert parsed.text.count("words at the bottom") == 20


def test_the_nesting_probe_counts_like_the_tree_builder():
    # Void elements and <x/> open nothing; a stray end tag closes nothing.
    data = ("<p>" + "<br><img src=x><span/></b>" * 5000 + "text</p>").encode()
    assert "text" in document_parse(data=data, name="flat.html").text
    assert parsers.HTML_MAX_DEPTH == HTML_MAX_DEPTH
