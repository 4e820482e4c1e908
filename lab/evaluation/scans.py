"""Scanned copies of documents, made the way a scanner or a phone makes them: pages rendered
to greyscale images, then turned a little (skew), speckled (noise), blurred and saved as
JPEG. The OCR evaluation set (lab/datasets/scanned/build.py) and the OCR tests
(tests/support/scans.py) make their scans here, deterministically (seeded noise).

Only pypdfium2 and Pillow are used: nothing outside the project's dependencies.
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass

from PIL import Image, ImageFilter


@dataclass(frozen=True)
class Degradation:
    """What the scan does to a page: `skew` degrees turned (anticlockwise), `rotate` a
    quarter turn or two (the page fed sideways: 90, 180, 270 anticlockwise), `noise` the share
    of pixels speckled, `blur` a Gaussian radius in pixels, `jpeg` the JPEG quality (None:
    lossless)."""

    skew: float = 0.0
    rotate: int = 0
    noise: float = 0.0
    blur: float = 0.0
    jpeg: int | None = None
    seed: int = 0


CLEAN = Degradation()
REALISTIC = Degradation(skew=2.0, noise=0.003, blur=0.5, jpeg=60, seed=1)


def pdf_page_images(pdf: bytes, *, dpi: int = 150) -> list[Image.Image]:
    """Every page of `pdf` rendered as a greyscale image at `dpi`."""
    import pypdfium2

    document = pypdfium2.PdfDocument(pdf)
    try:
        images = []
        for index in range(len(document)):
            page = document[index]
            images.append(page.render(scale=dpi / 72, grayscale=True).to_pil().convert("L"))
            page.close()
        return images
    finally:
        document.close()


def scan(image: Image.Image, degradation: Degradation = REALISTIC) -> Image.Image:
    """`image` as a scanner would return it under `degradation` (a greyscale image; JPEG
    artefacts included when `degradation.jpeg` is set)."""
    page = image.convert("L")
    if degradation.skew:
        page = page.rotate(degradation.skew, expand=True, fillcolor=255, resample=Image.BICUBIC)
    if degradation.rotate:
        page = page.rotate(degradation.rotate, expand=True, fillcolor=255)
    if degradation.blur:
        page = page.filter(ImageFilter.GaussianBlur(degradation.blur))
    if degradation.noise:
        generator = random.Random(degradation.seed)
        pixels = page.load()
        width, height = page.size
        for _ in range(int(width * height * degradation.noise)):
            x, y = generator.randrange(width), generator.randrange(height)
            pixels[x, y] = generator.choice((0, 96, 255))
    if degradation.jpeg is not None:
        buffer = io.BytesIO()
        page.save(buffer, format="JPEG", quality=degradation.jpeg)
        page = Image.open(io.BytesIO(buffer.getvalue()))
        page.load()
    return page


def image_bytes(image: Image.Image, format: str, *, dpi: int = 150, quality: int = 60) -> bytes:
    """The image as a file of `format` ("PNG", "JPEG", "TIFF")."""
    buffer = io.BytesIO()
    options = {"dpi": (dpi, dpi)}
    if format == "JPEG":
        options["quality"] = quality
    image.save(buffer, format=format, **options)
    return buffer.getvalue()


def tiff_bytes(images: list[Image.Image], *, dpi: int = 150) -> bytes:
    """A multi-page TIFF (one page per image, compressed losslessly)."""
    buffer = io.BytesIO()
    first, *rest = images
    first.save(
        buffer,
        format="TIFF",
        save_all=True,
        append_images=rest,
        dpi=(dpi, dpi),
        compression="tiff_deflate",
    )
    return buffer.getvalue()


def scanned_pdf(
    pdf: bytes,
    *,
    degradation: Degradation = REALISTIC,
    pages: set[int] | None = None,
    dpi: int = 200,
) -> bytes:
    """A copy of `pdf` whose pages `pages` (1-based; all when None) are scans: images
    without a text layer, JPEG-compressed inside the PDF (at the degradation's quality, else
    75); its other pages keep their text."""
    from pypdf import PdfReader, PdfWriter

    images = pdf_page_images(pdf, dpi=dpi)
    original = PdfReader(io.BytesIO(pdf))
    writer = PdfWriter()
    for number, image in enumerate(images, start=1):
        if pages is not None and number not in pages:
            writer.add_page(original.pages[number - 1])
            continue
        scanned = scan(image, degradation)
        buffer = io.BytesIO()
        quality = degradation.jpeg or 75
        scanned.convert("L").save(buffer, format="PDF", resolution=dpi, quality=quality)
        writer.add_page(PdfReader(io.BytesIO(buffer.getvalue())).pages[0])
    output = io.BytesIO()
    writer.write(output)
    return output.getvalue()
