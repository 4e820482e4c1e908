"""Scanned PDFs and images read by OCR (Tesseract, installed by `make test`): page numbers
kept so citations stay page-exact, text and scanned pages of one PDF both read, a sideways
scan turned upright, each chunk's OCR confidence kept, the page and time budgets, the
progress shown in the admin, and Tesseract run at low priority on one thread."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from PIL import Image

from chat.presenters import sources_from_event
from knowledge.models import Chunk, Document
from knowledge.parsers import DocumentParseError, document_parse
from knowledge.services import document_ingest
from lab.evaluation.scans import pdf_page_images, scan, tiff_bytes
from tests.support.answers import collect
from tests.support.scans import (
    CLEAN,
    PAGE_WORDS,
    REALISTIC,
    Degradation,
    photo_jpeg,
    sample_pdf,
    scanned_sample_pdf,
    scanned_tiff,
)

pytestmark = pytest.mark.slow  # Tesseract takes seconds a page


def page_texts(parsed) -> dict[int, str]:
    texts: dict[int, str] = {}
    for block in parsed.blocks:
        texts[block.page] = texts.get(block.page, "") + " " + block.text
    return texts


def test_a_scanned_pdf_is_read_page_by_page_with_its_confidence_and_progress():
    progress: list[str] = []

    parsed = document_parse(
        data=scanned_sample_pdf(), name="expenses-scan.pdf", progress=progress.append
    )

    texts = page_texts(parsed)
    assert sorted(texts) == [1, 2, 3]
    for page, words in PAGE_WORDS.items():
        assert words in texts[page], (page, texts[page])
    assert all(block.ocr_confidence is not None for block in parsed.blocks)
    assert all(60 <= block.ocr_confidence <= 100 for block in parsed.blocks)
    ocr = parsed.metadata["ocr"]
    assert (ocr["pages"], ocr["unread"], ocr["stopped"]) == ([1, 2, 3], [], "")
    assert ocr["confidence"] > 60
    assert progress == ["OCR: page 1 of 3", "OCR: page 2 of 3", "OCR: page 3 of 3", ""]


def test_a_pdf_mixing_text_and_scanned_pages_reads_both_in_page_order():
    parsed = document_parse(data=scanned_sample_pdf(pages=frozenset({2})), name="mixed.pdf")

    texts = page_texts(parsed)
    for page, words in PAGE_WORDS.items():
        assert words in texts[page]
    assert [block.page for block in parsed.blocks] == sorted(block.page for block in parsed.blocks)
    by_page = {block.page: block.ocr_confidence for block in parsed.blocks}
    assert by_page[1] is None and by_page[3] is None  # the text layer, read as such
    assert by_page[2] is not None
    assert parsed.metadata["ocr"]["pages"] == [2]


def test_a_scan_fed_sideways_is_turned_upright_before_it_is_read():
    sideways = Degradation(rotate=90, noise=0.005, jpeg=70, seed=3)

    parsed = document_parse(
        data=scanned_sample_pdf(pages=frozenset({3}), degradation=sideways), name="sideways.pdf"
    )

    assert PAGE_WORDS[3] in page_texts(parsed)[3]


def test_a_photo_and_a_multi_page_tiff_are_read_with_their_page_numbers():
    photo = document_parse(data=photo_jpeg(page=2), name="receipt-rules.jpg")
    assert {block.page for block in photo.blocks} == {1}
    assert PAGE_WORDS[2] in page_texts(photo)[1]
    assert photo.media_type == "image/jpeg"

    tiff = document_parse(data=scanned_tiff(CLEAN), name="expenses.tiff")
    texts = page_texts(tiff)
    for page, words in PAGE_WORDS.items():
        assert words in texts[page]


def test_a_picture_that_is_not_an_image_is_a_readable_error():
    with pytest.raises(DocumentParseError, match="Could not read the image"):
        document_parse(data=b"\x89PNG\r\n\x1a\n not really", name="scan.png")


def test_the_page_budget_reads_the_first_pages_and_records_the_others(settings):
    settings.OCR_MAX_PAGES = 2

    parsed = document_parse(data=scanned_sample_pdf(), name="expenses-scan.pdf")

    assert sorted(page_texts(parsed)) == [1, 2]
    ocr = parsed.metadata["ocr"]
    assert (ocr["pages"], ocr["unread"], ocr["stopped"]) == ([1, 2], [3], "page budget")


def test_the_time_budget_leaves_scanned_pages_unread_and_keeps_the_text_pages(settings):
    settings.OCR_MAX_SECONDS = 0.01  # over before Tesseract has read anything

    parsed = document_parse(data=scanned_sample_pdf(pages=frozenset({2})), name="mixed.pdf")

    assert sorted(page_texts(parsed)) == [1, 3]
    ocr = parsed.metadata["ocr"]
    assert (ocr["pages"], ocr["unread"], ocr["stopped"]) == ([], [2], "time budget")


def test_a_scan_left_wholly_unread_by_the_time_budget_fails_saying_why(settings):
    settings.OCR_MAX_SECONDS = 0.01

    with pytest.raises(DocumentParseError) as caught:
        document_parse(data=scanned_sample_pdf(), name="expenses-scan.pdf")

    assert str(caught.value) == (
        "No text could be read from the scanned PDF: OCR stopped at its time budget "
        "(OCR_MAX_SECONDS = 0.01 s): pages 1-3 were not read."
    )


def test_a_missing_language_pack_is_a_readable_error(settings):
    settings.OCR_LANGUAGES = ["eng", "zzz"]

    with pytest.raises(DocumentParseError, match="language pack for 'eng\\+zzz' is not installed"):
        document_parse(data=photo_jpeg(), name="receipt-rules.jpg")


def tesseract_recorded(tmp_path, monkeypatch, line: str = "run") -> Path:
    """A `tesseract` earlier on the PATH that appends `line` (shell words, expanded in the
    process Tesseract runs as) to the returned log at each run, then runs the real one."""
    log = tmp_path / "runs.log"
    wrapper = tmp_path / "tesseract"
    wrapper.write_text(f'#!/bin/sh\necho "{line}" >> {log}\nexec /usr/bin/tesseract "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return log


def test_tesseract_runs_niced_on_one_thread(tmp_path, monkeypatch):
    """Tesseract's own process records its niceness and thread limit as it starts."""
    log = tesseract_recorded(
        tmp_path, monkeypatch, line='$(cut -d" " -f19 /proc/$$/stat) $OMP_THREAD_LIMIT'
    )
    monkeypatch.delenv("OMP_THREAD_LIMIT", raising=False)

    document_parse(data=photo_jpeg(degradation=CLEAN), name="receipt-rules.jpg")

    started = log.read_text().split("\n")[0].split()
    # Niceness 10 above this process's own (a niced worker's OCR runs lower still), and
    # OMP_THREAD_LIMIT=1.
    assert started == [str(min(19, os.nice(0) + 10)), "1"]


def test_a_blank_page_is_counted_as_read_without_running_tesseract(tmp_path, monkeypatch):
    """A page of one even tone (a page that renders empty) has nothing to read: it is
    recorded as read, with no text, and Tesseract is not run on it."""
    runs = tesseract_recorded(tmp_path, monkeypatch)
    first, _, third = pdf_page_images(sample_pdf(), dpi=200)
    blank = Image.new("L", first.size, 236)

    with pytest.raises(DocumentParseError, match="No text"):
        document_parse(data=tiff_bytes([blank]), name="empty-page.tiff")
    assert not runs.exists()

    parsed = document_parse(
        data=tiff_bytes([scan(first, CLEAN), blank, scan(third, CLEAN)]),
        name="with-an-empty-page.tiff",
    )
    texts = page_texts(parsed)
    assert sorted(texts) == [1, 3]
    assert PAGE_WORDS[1] in texts[1] and PAGE_WORDS[3] in texts[3]
    assert parsed.metadata["ocr"]["pages"] == [1, 2, 3]


def test_faint_text_on_a_page_is_still_read(tmp_path, monkeypatch):
    """Text one shade darker than its paper is not a blank page: Tesseract reads it."""
    runs = tesseract_recorded(tmp_path, monkeypatch)
    page = pdf_page_images(sample_pdf(), dpi=200)[2]
    faint = page.point(lambda value: 254 + value // 255)  # ink at 254, paper at 255

    parsed = document_parse(data=tiff_bytes([faint]), name="faint.tiff")

    assert runs.exists()
    assert PAGE_WORDS[3] in page_texts(parsed)[1]


@pytest.mark.parametrize("mode", ["L", "1"])
def test_the_speckle_filter_gives_the_pixels_of_pils_median_filter(mode):
    """`median_filtered` is PIL's 3×3 median filter, pixel for pixel, edges included, on
    greyscale and bilevel pages of any shape (none, one pixel, one row, one column, odd
    sizes), on noise and on a rendered page with speckles."""
    import numpy as np
    from PIL import ImageFilter

    from knowledge.parsers.ocr import median_filtered

    generator = np.random.default_rng(41)
    page = scan(pdf_page_images(sample_pdf(), dpi=100)[0], REALISTIC).convert("L")
    images = [page.convert(mode)]
    for height, width in [(1, 1), (1, 7), (7, 1), (2, 2), (3, 3), (37, 64), (201, 150)]:
        noise = generator.integers(0, 256, size=(height, width), dtype=np.uint8)
        images.append(Image.fromarray(noise).convert(mode))
    images += [Image.new(mode, (0, 5)), Image.new(mode, (5, 0))]  # no pixels at all
    for image in images:
        filtered = median_filtered(image)
        assert filtered.mode == image.mode and filtered.size == image.size
        expected = np.asarray(image.filter(ImageFilter.MedianFilter(3)))
        assert np.array_equal(np.asarray(filtered), expected), image.size


# --- Ingested, asked about, cited --------------------------------------------------------


@pytest.mark.django_db(transaction=True)
async def test_a_scanned_pdf_is_answered_with_a_citation_to_its_page(tmp_path, staff_user):
    from asgiref.sync import sync_to_async

    path = tmp_path / "travel-expenses-scan.pdf"
    path.write_bytes(scanned_sample_pdf())
    outcome = await sync_to_async(document_ingest)(path=path)
    assert outcome.action == "new", outcome.error

    events = await collect(user=staff_user, question="How much is private car mileage paid?")

    citations = next(event for event in events if event.type == "sources").data["citations"]
    assert citations[0]["page"] == 3
    assert "45 pence" in citations[0]["text"]
    source = (await sync_to_async(sources_from_event)(citations))[0]
    assert source.location.startswith("Page 3 · scanned page")
    confidences = await sync_to_async(list)(
        Chunk.objects.filter(document=outcome.document).values_list("ocr_confidence", flat=True)
    )
    assert confidences and all(value is not None and value > 60 for value in confidences)


@pytest.mark.django_db(transaction=True)
async def test_a_photo_is_answered_with_a_citation_to_its_page(tmp_path, staff_user):
    from asgiref.sync import sync_to_async

    path = tmp_path / "receipts-photo.jpg"
    path.write_bytes(photo_jpeg(page=2))
    outcome = await sync_to_async(document_ingest)(path=path)
    assert outcome.action == "new", outcome.error

    events = await collect(user=staff_user, question="Why photograph paper receipts on the day?")

    citations = next(event for event in events if event.type == "sources").data["citations"]
    assert citations[0]["page"] == 1
    assert "thermal paper" in citations[0]["text"]


@pytest.mark.django_db
def test_the_admin_shows_ocr_progress_while_a_document_is_processed(admin_client):
    Document.objects.create(
        title="Scanned minutes",
        source="/tmp/minutes.pdf",
        status=Document.Status.PROCESSING,
        progress="OCR: page 2 of 5",
    )

    listing = admin_client.get("/admin/knowledge/document/").content.decode()

    assert "Processing · OCR: page 2 of 5" in listing


@pytest.mark.django_db
def test_ingestion_writes_progress_on_the_document_and_clears_it(tmp_path, monkeypatch):
    """The OCR runs in the parsing child (knowledge/parsers/isolated.py): its progress
    messages come back through the pipe and are written on the document as they arrive."""
    from knowledge.services import ingest

    path = tmp_path / "receipts-photo.jpg"
    path.write_bytes(photo_jpeg(page=2, degradation=REALISTIC))
    Document.objects.create(title="Receipts", source=str(path.resolve()), media_type="image/jpeg")
    seen: list[str] = []
    real = ingest._progress_writer

    def writer(source: str):
        write = real(source)

        def recording(message: str) -> None:
            write(message)
            seen.append(Document.objects.get().progress)

        return recording

    monkeypatch.setattr(ingest, "_progress_writer", writer)
    document_ingest(path=path)

    assert seen == ["OCR: page 1 of 1", ""]
    assert Document.objects.get().progress == ""


@pytest.mark.django_db
def test_the_admin_says_what_ocr_read_and_what_its_budget_left_unread(
    admin_client, tmp_path, settings
):
    settings.OCR_MAX_PAGES = 2
    path = tmp_path / "expenses-scan.pdf"
    path.write_bytes(scanned_sample_pdf())
    outcome = document_ingest(path=path)
    assert outcome.action == "new", outcome.error

    page = admin_client.get(f"/admin/knowledge/document/{outcome.document.pk}/change/")

    text = page.content.decode()
    assert "2 pages read by OCR, mean confidence " in text
    assert "OCR stopped at its page budget (OCR_MAX_PAGES = 2): page 3 was not read." in text
