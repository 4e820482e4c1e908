"""Images (.png, .jpg/.jpeg, .tif/.tiff, multi-page TIFF included) read by OCR
(knowledge/parsers/ocr.py): each frame is a page, numbered from 1, within the document's OCR
budget. Pillow opens the file; one larger than IMAGE_MAX_PIXELS per frame is refused before
it is decoded (a "decompression bomb")."""

from __future__ import annotations

import io

from knowledge.parsers.base import BlockBuilder, DocumentParseError, error_reason
from knowledge.parsers.ocr import OcrReader, ocr_shortfall

# A frame's pixels: a 600 dpi A3 scan is 70 million; beyond this, not a page.
IMAGE_MAX_PIXELS = 120_000_000
IMAGE_MAX_FRAMES = 10_000


def parse_image(data: bytes, builder: BlockBuilder) -> str | None:
    """Add the text OCR reads on each frame of the image `data` to `builder` (page = frame
    number). Raises `DocumentParseError` on a file Pillow cannot open, or when no page could
    be read within the budget."""
    from PIL import Image

    try:
        image = Image.open(io.BytesIO(data))
        frames = getattr(image, "n_frames", 1)
        if image.width * image.height > IMAGE_MAX_PIXELS:
            raise DocumentParseError(
                f"The image is too large ({image.width:,} × {image.height:,} pixels; the limit "
                f"is {IMAGE_MAX_PIXELS:,} pixels): it is not a scanned page."
            )
        if frames > IMAGE_MAX_FRAMES:
            raise DocumentParseError(f"The image has too many pages ({frames:,}).")
    except DocumentParseError:
        raise
    except Exception as exc:  # Pillow's UnidentifiedImageError, truncated files, ...
        raise DocumentParseError(
            f"Could not read the image: the file is damaged or not an image ({error_reason(exc)})."
        ) from exc

    def frame(index: int):
        image.seek(index)
        if image.width * image.height > IMAGE_MAX_PIXELS:
            raise DocumentParseError("A page of the image is too large to be a scanned page.")
        return image.copy()

    with image, OcrReader(builder=builder, total=frames) as ocr:
        for index in range(frames):
            ocr.page_add(index + 1, lambda index=index: frame(index))
    if not builder.blocks and (shortfall := ocr_shortfall(builder)):
        raise DocumentParseError(f"No text could be read from the image: {shortfall}")
    return None
