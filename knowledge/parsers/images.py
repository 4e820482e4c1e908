"""Images (.png, .jpg/.jpeg, .tif/.tiff, multi-page TIFF included) read by OCR
(knowledge/parsers/ocr.py): each frame is a page, numbered from 1, within the document's OCR
budget. Pillow opens the file lazily (its header only): the frames are counted and each
one's size read from its header before any is decoded, and a file with a frame larger than
settings.OCR_MAX_PIXELS is refused unread (a "decompression bomb";
docs/decisions/0145-bounds-before-allocation.md)."""

from __future__ import annotations

import io
import re

from django.conf import settings

from knowledge.parsers.base import BlockBuilder, DocumentParseError, error_reason
from knowledge.parsers.ocr import OcrReader, ocr_shortfall

IMAGE_MAX_FRAMES = 10_000
_POSITIONAL_PIXELS = re.compile(r"\((\d+) pixels\)")


def _pillow_limit() -> None:
    """Pillow's own guard set to ours: it refuses (DecompressionBombError) at open an image
    over twice settings.OCR_MAX_PIXELS whatever reads it; ours refuses at once over it."""
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = settings.OCR_MAX_PIXELS


def _too_large(width: int, height: int, *, frame: int, frames: int) -> DocumentParseError:
    where = f"Page {frame} of the image is" if frames > 1 else "The image is"
    return DocumentParseError(
        f"{where} too large ({width:,} × {height:,} pixels; the limit is "
        f"{settings.OCR_MAX_PIXELS:,} pixels): it is not a scanned page."
    )


def parse_image(data: bytes, builder: BlockBuilder) -> str | None:
    """Add the text OCR reads on each frame of the image `data` to `builder` (page = frame
    number). Raises `DocumentParseError` on a file Pillow cannot open, one with too many
    frames or a frame too large (found from the headers, before any frame is decoded), or
    when no page could be read within the budget."""
    from PIL import Image

    _pillow_limit()
    limit = settings.OCR_MAX_PIXELS
    try:
        image = Image.open(io.BytesIO(data))
        frames = getattr(image, "n_frames", 1)  # TIFF: walks the frames' headers only
        if frames > IMAGE_MAX_FRAMES:
            raise DocumentParseError(
                f"The image has too many pages ({frames:,}; the limit is {IMAGE_MAX_FRAMES:,})."
            )
        for index in range(frames):
            if frames > 1:
                image.seek(index)  # reads the frame's header, decodes nothing
            if image.width * image.height > limit:
                raise _too_large(image.width, image.height, frame=index + 1, frames=frames)
        if frames > 1:
            image.seek(0)
    except DocumentParseError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:  # Pillow
        found = _POSITIONAL_PIXELS.search(str(exc))
        size = f"{int(found.group(1)):,} pixels; " if found else ""
        raise DocumentParseError(
            f"The image is too large ({size}the limit is {limit:,} pixels): it is not a "
            "scanned page."
        ) from exc
    except Exception as exc:  # Pillow's UnidentifiedImageError, truncated files, ...
        raise DocumentParseError(
            f"Could not read the image: the file is damaged or not an image ({error_reason(exc)})."
        ) from exc

    def frame(index: int):
        if frames > 1:
            image.seek(index)
        return image  # decoded by OCR's first step, not copied

    with image, OcrReader(builder=builder, total=frames) as ocr:
        for index in range(frames):
            ocr.page_add(index + 1, lambda index=index: frame(index), close=False)
    if not builder.blocks and (shortfall := ocr_shortfall(builder)):
        raise DocumentParseError(f"No text could be read from the image: {shortfall}")
    return None
