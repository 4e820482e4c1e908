"""Scanned documents for the OCR tests: the sample PDF (tests/support/documents.py) rendered
to images and degraded like a scanner's output (lab/evaluation/scans.py), as a scanned PDF,
a mixed PDF, a photo (JPEG) or a multi-page TIFF. Deterministic; made in memory, nothing
outside the project's dependencies."""

from __future__ import annotations

from functools import cache

from lab.evaluation.scans import (
    CLEAN,
    REALISTIC,
    Degradation,
    image_bytes,
    pdf_page_images,
    scan,
    scanned_pdf,
    tiff_bytes,
)
from tests.support import documents

__all__ = ["CLEAN", "REALISTIC", "Degradation"]

# Words found on one page of the sample PDF only (documents.PDF_PAGES).
PAGE_WORDS = {1: "Economy class", 2: "thermal paper fades", 3: "45 pence per mile"}


@cache
def sample_pdf() -> bytes:
    return documents.pdf_bytes()


@cache
def scanned_sample_pdf(
    *, pages: frozenset[int] | None = None, degradation: Degradation = REALISTIC
) -> bytes:
    """The sample PDF with `pages` (1-based; all when None) scanned."""
    return scanned_pdf(
        sample_pdf(), degradation=degradation, pages=set(pages) if pages is not None else None
    )


def photo_jpeg(page: int = 2, degradation: Degradation = REALISTIC) -> bytes:
    """A JPEG photo of one page of the sample PDF."""
    image = scan(pdf_page_images(sample_pdf(), dpi=200)[page - 1], degradation)
    return image_bytes(image, "JPEG", quality=70)


def scanned_tiff(degradation: Degradation = REALISTIC) -> bytes:
    """The sample PDF's pages as one multi-page TIFF."""
    images = pdf_page_images(sample_pdf(), dpi=200)
    return tiff_bytes([scan(image, degradation) for image in images])
