"""Bounds before allocation (docs/decisions/0145-bounds-before-allocation.md): a PDF page is
rendered for OCR at the resolution its size allows under settings.OCR_MAX_PIXELS, and a page
too large for that is left unread, said why; an image's size is read from its header and a
too-large one refused before it is decoded; a multi-page TIFF's frames are counted and
measured before any is decoded. The hostile files are generated (tests/support/hostile.py)."""

from __future__ import annotations

import time

import pytest
from PIL import Image

from knowledge.parsers import DocumentParseError, document_parse, ocr
from knowledge.parsers.ocr import OCR_DPI, PageTooLarge
from knowledge.parsers.pdf import render_scale
from tests.support import hostile, scans


@pytest.fixture
def ocr_calls(monkeypatch) -> list[tuple[int, int]]:
    """The sizes of the page images OCR is given (the real OCR still runs)."""
    calls: list[tuple[int, int]] = []
    real = ocr.page_ocr

    def spy(image, *, timeout):
        calls.append(image.size)
        return real(image, timeout=timeout)

    monkeypatch.setattr(ocr, "page_ocr", spy)
    return calls


def test_a_huge_page_without_text_fails_that_page_readably_without_being_rendered(ocr_calls):
    data = hostile.huge_page_pdf(11_000)
    assert len(data) < 1000

    started = time.monotonic()
    with pytest.raises(DocumentParseError) as caught:
        document_parse(data=data, name="poster.pdf")

    assert time.monotonic() - started < 5
    assert ocr_calls == []
    assert str(caught.value) == (
        "No text could be read from the scanned PDF: Page 1 is too large to read by OCR "
        "(388 × 388 cm; at most 40 megapixels at 100 dpi)."
    )


def test_a_large_page_is_rendered_under_the_pixel_budget_not_at_300_dpi(settings):
    settings.OCR_MAX_PIXELS = 40_000_000
    a0 = render_scale(2384, 3370, settings.OCR_MAX_PIXELS, number=1)  # A0: 300 dpi is 112 Mpx
    assert 2384 * 3370 * a0**2 <= 40_000_000
    assert 155 < a0 * 72 < 165  # 160 dpi
    assert render_scale(595, 842, settings.OCR_MAX_PIXELS, number=1) == OCR_DPI / 72  # A4
    with pytest.raises(PageTooLarge, match="page 4 is too large"):
        render_scale(11_000, 11_000, settings.OCR_MAX_PIXELS, number=4)


def test_a_scanned_page_beside_a_huge_one_is_still_read(settings):
    """The huge page fails alone: the document keeps what its other pages hold, and its
    metadata says which page was left and why."""
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for source in (scans.scanned_sample_pdf(pages=frozenset({1})), hostile.huge_page_pdf()):
        writer.add_page(PdfReader(io.BytesIO(source)).pages[0])
    buffer = io.BytesIO()
    writer.write(buffer)

    parsed = document_parse(data=buffer.getvalue(), name="mixed.pdf")

    assert {block.page for block in parsed.blocks} == {1}
    assert parsed.metadata["ocr"]["refused"] == [
        "page 2 is too large to read by OCR (388 × 388 cm; at most 40 megapixels at 100 dpi)"
    ]
    assert "Page 2 is too large to read by OCR" in ocr.ocr_summary(parsed.metadata)


def test_an_image_whose_header_claims_625_megapixels_is_refused_before_decoding(monkeypatch):
    data = hostile.png_claiming(25_000, 25_000)
    assert len(data) < 2**20
    decoded: list[object] = []
    monkeypatch.setattr(Image.Image, "load", lambda self: decoded.append(self))

    with pytest.raises(DocumentParseError) as caught:
        document_parse(data=data, name="poster.png")

    assert decoded == []
    assert str(caught.value) == (
        "The image is too large (625,000,000 pixels; the limit is 40,000,000 pixels): it is "
        "not a scanned page."
    )


def test_an_image_just_over_the_limit_is_refused_with_its_size(settings):
    settings.OCR_MAX_PIXELS = 1_000_000
    with pytest.raises(DocumentParseError, match=r"too large \(1,100 × 1,000 pixels"):
        document_parse(data=hostile.png_claiming(1100, 1000), name="wide.png")


def test_pillow_is_told_the_same_limit(settings):
    settings.OCR_MAX_PIXELS = 12_345_678
    with pytest.raises(DocumentParseError):
        document_parse(data=hostile.png_claiming(5000, 5000), name="big.png")
    assert Image.MAX_IMAGE_PIXELS == 12_345_678


def test_a_tiff_with_many_large_frames_is_refused_before_any_frame_is_decoded(ocr_calls):
    """Frame 1 is a page any scanner makes; frames 2 to 40 are 100 megapixels each (they
    decode from 200 KB): the file is refused from the frames' headers, nothing is read."""
    data = hostile.tiff_frames([(2000, 2000)] + [(10_000, 10_000)] * 39)
    assert len(data) < 2**20

    started = time.monotonic()
    with pytest.raises(DocumentParseError) as caught:
        document_parse(data=data, name="bundle.tiff")

    assert time.monotonic() - started < 5
    assert ocr_calls == []
    assert str(caught.value).startswith(
        "Page 2 of the image is too large (10,000 × 10,000 pixels; the limit is 40,000,000"
    )


def test_a_multi_page_tiff_within_the_limit_is_still_read_page_by_page():
    parsed = document_parse(data=scans.scanned_tiff(), name="receipts.tiff")
    assert len({block.page for block in parsed.blocks}) >= 2
