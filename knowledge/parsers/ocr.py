"""Optical character recognition with Tesseract, one page at a time, within a budget.

`page_ocr(image, ...)` reads one page image with Debian's `tesseract` command (TSV output:
every word with its confidence, 0-100) and returns its paragraphs, each with the mean
confidence of its words. A page whose first reading is poor is checked for its orientation
(Tesseract's orientation and script detection, `--psm 0`, package `tesseract-ocr-osd`); a
page lying on its side or upside down is turned and read again, and the better reading
kept. Before reading, every page is cleaned of speckles (a 3×3 median filter) and
straightened (`skew_angle`: the angle within ±MAX_SKEW degrees at which the rows of ink are
sharpest), since Tesseract splits the lines of a page a few degrees askew into columns. A page
of one even tone (`page_is_blank`) is counted as read without running Tesseract.

Tesseract runs under `nice` with `OMP_THREAD_LIMIT=1`, so OCR never competes with answering
questions for the processor, and one page at a time.

`OcrBudget` bounds the OCR of one document: at most settings.OCR_MAX_PAGES pages and
settings.OCR_MAX_SECONDS seconds; a page that would run past the time left is stopped.
`OcrReader` reads pages into a `BlockBuilder` until the budget runs out and records what it
did under the document's metadata (`ocr`). Why these choices, and the figures:
docs/decisions/0110-ocr-with-the-tesseract-command.md.
"""

from __future__ import annotations

import csv
import io
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings

from knowledge.parsers.base import BlockBuilder, DocumentParseError, clean_inline, lines_join

# Paragraphs whose words Tesseract reads with a mean confidence below this are dropped: what
# it finds in photographs, stamps and speckles ("|| ~ ;"), not text.
MIN_PARAGRAPH_CONFIDENCE = 40.0
# A first reading below this mean confidence (or with fewer words) asks for the orientation.
ORIENTATION_CHECK_BELOW = 75.0
ORIENTATION_CHECK_WORDS = 20
NICENESS = 10
OCR_DPI = 300  # page images are rendered at this resolution (and declared so to Tesseract)
# A page that would render at less than this within settings.OCR_MAX_PIXELS is not a page of
# text (11,000 pt square: 41 dpi at 40 megapixels): it is left unread, said why.
OCR_MIN_DPI = 100
# Larger images are scaled down first: a photo from a phone is 12+ megapixels, and Tesseract's
# time grows with the pixels without reading small text better past ~300 dpi on A4.
MAX_PIXELS = 3508 * 2481
MAX_SKEW = 5  # degrees a page may be askew and still be straightened
SKEW_PROBE_PIXELS = 800
# A page goes to Tesseract as a PNG compressed at this zlib level (1: the fastest to write;
# Tesseract reads it about as fast as the default level's, far faster than an uncompressed one).
PNG_COMPRESS_LEVEL = 1


class OcrUnavailable(DocumentParseError):
    """Tesseract (or a language pack it was asked for) is not installed."""


class PageTooLarge(DocumentParseError):
    """A page too large to be read within the pixel budget; the message says which and why
    ("page 1 is too large to read by OCR (388 × 388 cm; …)"). The page is left unread."""


@dataclass(frozen=True)
class OcrParagraph:
    text: str
    confidence: float  # mean confidence of its words, 0-100


@dataclass(frozen=True)
class OcrPage:
    paragraphs: list[OcrParagraph]
    rotation: int  # degrees the image was turned clockwise before it was read
    words: int
    confidence: float | None  # mean over the page's words; None when it has none


@dataclass
class OcrBudget:
    """Pages and seconds of OCR one document may use (settings.OCR_MAX_PAGES,
    settings.OCR_MAX_SECONDS), and what it has used."""

    max_pages: int
    max_seconds: float
    started: float = field(default_factory=time.monotonic)
    pages_read: int = 0
    stopped: str = ""  # why pages were left unread: "page budget", "time budget"

    @classmethod
    def from_settings(cls) -> OcrBudget:
        return cls(max_pages=settings.OCR_MAX_PAGES, max_seconds=settings.OCR_MAX_SECONDS)

    def seconds_left(self) -> float:
        return self.max_seconds - (time.monotonic() - self.started)

    def page_allowed(self) -> bool:
        """True when one more page may be read; else records why not."""
        if self.pages_read >= self.max_pages:
            self.stopped = self.stopped or "page budget"
        elif self.seconds_left() <= 0:
            self.stopped = self.stopped or "time budget"
        return not self.stopped


class _OcrTimeout(Exception):
    pass


def languages_setting() -> str:
    """Tesseract's `-l` argument from settings.OCR_LANGUAGES ("eng", "eng+fra")."""
    return "+".join(settings.OCR_LANGUAGES) or "eng"


def _tesseract(args: list[str], image_png: bytes, timeout: float) -> str:
    """Run `tesseract stdin stdout ARGS` at low priority on one PNG; its standard output."""
    binary = shutil.which("tesseract")
    if binary is None:
        raise OcrUnavailable(
            "Scanned pages and images need OCR, and Tesseract is not installed on the server "
            "(Debian: apt-get install tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd)."
        )
    command = [binary, "stdin", "stdout", *args]
    if nice := shutil.which("nice"):
        command = [nice, "-n", str(NICENESS), *command]
    environment = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        result = subprocess.run(
            command,
            input=image_png,
            capture_output=True,
            timeout=max(timeout, 0.1),
            env=environment,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:  # subprocess.run has killed it
        raise _OcrTimeout from exc
    message = result.stderr.decode("utf-8", "replace")
    # A missing pack among several is only a warning to Tesseract (it reads on without it).
    if "Failed loading language" in message or "Error opening data file" in message:
        raise OcrUnavailable(
            f"The OCR language pack for '{languages_setting()}' is not installed on the "
            "server (settings.OCR_LANGUAGES; Debian: apt-get install tesseract-ocr-<lang>)."
        )
    if result.returncode != 0:
        detail = " ".join(message.split())[-200:] or f"exit status {result.returncode}"
        raise DocumentParseError(f"OCR failed on a page: {detail}")
    return result.stdout.decode("utf-8", "replace")


def _png(image) -> bytes:
    """`image` as a PNG for Tesseract's standard input, compressed at zlib's fastest level
    (the same pixels; docs/decisions/0110-ocr-with-the-tesseract-command.md has the figures)."""
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=PNG_COMPRESS_LEVEL)
    return buffer.getvalue()


def image_prepare(image):
    """A PIL image ready for Tesseract: EXIF orientation applied, in greyscale, at most
    MAX_PIXELS, speckles removed (median filter) and straightened (`skew_angle`). No full-size
    copy is made that an in-place step avoids: a JPEG larger than MAX_PIXELS is decoded at a
    reduced size (`draft`), the EXIF turn only when the image has one."""
    from PIL import Image, ImageOps

    pixels = image.width * image.height
    if pixels > MAX_PIXELS and image.format == "JPEG":
        scale = (MAX_PIXELS / pixels) ** 0.5
        image.draft("L", (max(1, int(image.width * scale)), max(1, int(image.height * scale))))
    if image.getexif().get(0x0112, 1) != 1:  # Orientation: anything but "upright"
        image = ImageOps.exif_transpose(image)
    if image.mode not in ("L", "1"):
        if image.mode in ("RGBA", "LA", "P"):
            image = image.convert("RGBA")
            background = _white(image.size)
            background.paste(image, mask=image.getchannel("A"))
            image = background
        image = image.convert("L")
    pixels = image.width * image.height
    if pixels > MAX_PIXELS:
        scale = (MAX_PIXELS / pixels) ** 0.5
        image = image.resize((max(1, int(image.width * scale)), max(1, int(image.height * scale))))
    image = median_filtered(image)
    if angle := skew_angle(image):
        image = image.rotate(angle, expand=True, fillcolor=255, resample=Image.BICUBIC)
    return image


def median_filtered(image):
    """A greyscale ("L") or bilevel ("1") PIL image with each pixel replaced by the median of
    its 3×3 neighbourhood, the edge pixels repeated beyond the border: the very pixels of PIL's
    `ImageFilter.MedianFilter(3)`, worked out with whole-array minima and maxima (each
    column of three pixels sorted once, then shared by the three pixels beside it) instead of
    a sort per pixel."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(image)
    if pixels.size == 0:  # an image with no pixels has nothing to filter (as PIL's)
        return image.copy()
    bilevel = pixels.dtype == np.bool_
    if bilevel:
        pixels = pixels.view(np.uint8)
    low, high = np.minimum, np.maximum
    padded = np.pad(pixels, 1, mode="edge")
    above, at, below = padded[:-2], padded[1:-1], padded[2:]
    pair_low, pair_high = low(above, at), high(above, at)
    # Each column of three (above, at, below) in order: its least, middle and greatest.
    least, greatest = low(pair_low, below), high(pair_high, below)
    middle = high(pair_low, low(pair_high, below))
    del padded, above, at, below, pair_low, pair_high
    width = pixels.shape[1]

    def left_at_right(values):
        return values[:, :width], values[:, 1 : width + 1], values[:, 2:]

    # The median of nine: the median of the greatest of the three least, the median of the
    # three middles and the least of the three greatest.
    a, b, c = left_at_right(least)
    most_of_least = high(high(a, b), c)
    a, b, c = left_at_right(greatest)
    least_of_greatest = low(low(a, b), c)
    a, b, c = left_at_right(middle)
    median_of_middles = high(low(a, b), low(high(a, b), c))
    median = high(
        low(most_of_least, median_of_middles),
        low(high(most_of_least, median_of_middles), least_of_greatest),
    )
    return Image.fromarray(median.view(np.bool_) if bilevel else median)


def skew_angle(image) -> float:
    """Degrees (anticlockwise, PIL's sense) that straighten the lines of text of a greyscale
    page, within ±MAX_SKEW: the angle at which the ink's row profile changes most sharply
    (lines and the gaps between them), found on a copy at most SKEW_PROBE_PIXELS wide, first
    by whole degrees, then by tenths around the best. 0 for a blank page."""
    import numpy as np
    from PIL import Image

    probe = image
    scale = SKEW_PROBE_PIXELS / max(image.size)
    if scale < 1:
        probe = image.resize((max(1, int(image.width * scale)), max(1, int(image.height * scale))))
    ink = Image.fromarray(((np.asarray(probe) < 128) * 255).astype("uint8"))
    if not np.asarray(ink).any():
        return 0.0

    def sharpness(angle: float) -> float:
        rows = np.asarray(ink.rotate(angle, resample=Image.NEAREST)).sum(axis=1, dtype=np.float64)
        return float(np.sum(np.diff(rows) ** 2))

    def best(angles) -> float:
        return max(angles, key=lambda angle: (sharpness(angle), -abs(angle)))

    coarse = best([float(a) for a in range(-MAX_SKEW, MAX_SKEW + 1)])
    fine = best([round(coarse + step / 10, 1) for step in range(-10, 11)])
    return fine if abs(fine) >= 0.2 else 0.0


def _white(size: tuple[int, int]):
    from PIL import Image

    return Image.new("RGB", size, "white")


def _read_tsv(tsv: str) -> OcrPage:
    """Tesseract's TSV into paragraphs (its block and paragraph numbers), lines joined."""
    lines: dict[tuple[int, int, int], list[tuple[str, float]]] = {}
    for row in csv.DictReader(io.StringIO(tsv), delimiter="\t", quoting=csv.QUOTE_NONE):
        if row.get("level") != "5":
            continue
        text = clean_inline(row.get("text") or "")
        try:
            confidence = float(row.get("conf") or -1)
        except ValueError:
            continue
        if not text or confidence < 0:
            continue
        key = (int(row["block_num"]), int(row["par_num"]), int(row["line_num"]))
        lines.setdefault(key, []).append((text, confidence))
    paragraphs: list[OcrParagraph] = []
    all_confidences: list[float] = []
    current_key: tuple[int, int] | None = None
    current_lines: list[str] = []
    current_confidences: list[float] = []

    def flush() -> None:
        if current_lines:
            mean = sum(current_confidences) / len(current_confidences)
            if mean >= MIN_PARAGRAPH_CONFIDENCE:
                paragraphs.append(OcrParagraph(lines_join(current_lines), round(mean, 1)))

    for (block, paragraph, _), words in lines.items():
        if (block, paragraph) != current_key:
            flush()
            current_key, current_lines, current_confidences = (block, paragraph), [], []
        current_lines.append(" ".join(word for word, _ in words))
        current_confidences.extend(confidence for _, confidence in words)
        all_confidences.extend(confidence for _, confidence in words)
    flush()
    mean = sum(all_confidences) / len(all_confidences) if all_confidences else None
    return OcrPage(paragraphs, 0, len(all_confidences), mean)


def _orientation(png: bytes, timeout: float) -> int:
    """Degrees to turn the image clockwise so its text stands upright (0 when unsure or
    when the page holds too little text to tell)."""
    try:
        output = _tesseract(["--psm", "0", "--dpi", str(OCR_DPI), "-l", "osd"], png, timeout)
    except OcrUnavailable:
        raise
    except DocumentParseError:  # "Too few characters": nothing to turn
        return 0
    for line in output.splitlines():
        if line.startswith("Rotate:"):
            try:
                return int(line.split(":", 1)[1]) % 360
            except ValueError:
                return 0
    return 0


def page_ocr(image, *, timeout: float) -> OcrPage:
    """Read one page image (PIL). Raises `OcrUnavailable` when Tesseract or the language pack
    is missing, `_OcrTimeout` past `timeout` seconds."""
    deadline = time.monotonic() + timeout
    image = image_prepare(image)
    if page_is_blank(image):
        return OcrPage([], 0, 0, None)
    png = _png(image)
    arguments = ["--psm", "3", "--dpi", str(OCR_DPI), "-l", languages_setting(), "tsv"]
    page = _read_tsv(_tesseract(arguments, png, deadline - time.monotonic()))
    if page.words >= ORIENTATION_CHECK_WORDS and (page.confidence or 0) >= ORIENTATION_CHECK_BELOW:
        return page
    rotation = _orientation(png, deadline - time.monotonic())
    if not rotation:
        return page
    turned = image.rotate(-rotation, expand=True, fillcolor=255)
    again = _read_tsv(_tesseract(arguments, _png(turned), deadline - time.monotonic()))
    again = OcrPage(again.paragraphs, rotation, again.words, again.confidence)
    return again if _quality(again) > _quality(page) else page


def page_is_blank(image) -> bool:
    """Whether a greyscale page image (`image_prepare`'s) is one even tone, every pixel the
    same: nothing on it to read (a page that renders empty). Counted as read with no words,
    without running Tesseract (twice: its few words would ask for the orientation). Any
    difference at all is read: Tesseract reads clean text one level darker than its paper."""
    darkest, lightest = image.getextrema()
    return darkest == lightest


def _quality(page: OcrPage) -> float:
    """Confident words read: what a better reading has more of."""
    return (page.confidence or 0) * sum(len(p.text) for p in page.paragraphs)


class OcrReader:
    """Reads the scanned pages of one document into `builder`, one at a time, while `budget`
    allows (default: `OcrBudget.from_settings()`). Use as a context manager; on leaving it
    records under `builder.metadata["ocr"]` the pages read, those left unread and why
    (`stopped`), the mean word confidence and the seconds spent, and clears the progress
    message. `total`: how many pages the document has to OCR, for the progress messages
    ("OCR: page 3 of 10") sent to `builder.progress`."""

    def __init__(self, *, builder: BlockBuilder, total: int, budget: OcrBudget | None = None):
        self.builder = builder
        self.total = total
        self.budget = budget or OcrBudget.from_settings()
        self.pages: list[int] = []
        self.unread: list[int] = []
        self.refused: list[str] = []  # pages too large to read, each said why
        self._confidences: list[tuple[float, int]] = []
        self._started = time.monotonic()

    def __enter__(self) -> OcrReader:
        return self

    def __exit__(self, *exc_info) -> None:
        words = sum(count for _, count in self._confidences)
        confidence = sum(c * n for c, n in self._confidences) / words if words else None
        self.builder.metadata["ocr"] = {
            "pages": self.pages,
            "unread": self.unread,
            "refused": self.refused,
            "stopped": self.budget.stopped,
            "confidence": round(confidence, 1) if confidence is not None else None,
            "seconds": round(time.monotonic() - self._started, 1),
        }
        if self.builder.progress is not None:
            self.builder.progress("")

    def page_add(self, number: int, load: Callable[[], object], *, close: bool = True) -> None:
        """OCR page `number`, whose image `load()` returns (a PIL image, closed after unless
        `close` is False), into the builder: one block per paragraph, with its page and
        `ocr_confidence`. A page `load()` refuses (`PageTooLarge`) is left unread, said why."""
        from PIL import Image

        if not self.budget.page_allowed():
            self.unread.append(number)
            return
        if self.builder.progress is not None:
            position = len(self.pages) + len(self.unread) + 1
            self.builder.progress(f"OCR: page {position} of {self.total}")
        try:
            image = load()
        except PageTooLarge as exc:
            self.refused.append(str(exc))
            return
        try:
            page = page_ocr(image, timeout=self.budget.seconds_left())
        except _OcrTimeout:
            self.budget.stopped = "time budget"
            self.unread.append(number)
            return
        finally:
            if close and isinstance(image, Image.Image):
                image.close()
        self.budget.pages_read += 1
        self.pages.append(number)
        if page.confidence is not None:
            self._confidences.append((page.confidence, page.words))
        for paragraph in page.paragraphs:
            self.builder.add(paragraph.text, page=number, ocr_confidence=paragraph.confidence)


def ocr_shortfall(builder: BlockBuilder) -> str:
    """A sentence for the person who gave us the file, when OCR left pages unread: which
    pages and which budget ("" when every page was read)."""
    return _shortfall(builder.metadata.get("ocr") or {})


def ocr_summary(metadata: object) -> str:
    """What OCR did on a document, from its metadata (`Document.metadata["ocr"]`): "3 pages
    read by OCR, mean confidence 91%", and what it left unread and why; "" when OCR was not
    used."""
    record = metadata.get("ocr") if isinstance(metadata, dict) else None
    if not isinstance(record, dict):
        return ""
    pages = record.get("pages") or []
    summary = f"{len(pages)} page{'s' if len(pages) != 1 else ''} read by OCR"
    if record.get("confidence") is not None:
        summary += f", mean confidence {record['confidence']:.0f}%"
    summary += f" ({record.get('seconds', 0):g} s)."
    shortfall = _shortfall(record)
    return f"{summary} {shortfall}" if shortfall else summary


def _shortfall(record: dict) -> str:
    refused = "; ".join(record.get("refused") or [])
    refused = f"{refused[:1].upper()}{refused[1:]}." if refused else ""
    unread = record.get("unread") or []
    if not unread:
        return refused
    if record.get("stopped") == "page budget":
        limit = f"its page budget (OCR_MAX_PAGES = {settings.OCR_MAX_PAGES})"
    else:
        limit = f"its time budget (OCR_MAX_SECONDS = {settings.OCR_MAX_SECONDS:g} s)"
    pages = _pages_label(unread)
    return " ".join(filter(None, [refused, f"OCR stopped at {limit}: {pages} not read."]))


def _pages_label(numbers: list[int]) -> str:
    if len(numbers) == 1:
        return f"page {numbers[0]} was"
    if numbers == list(range(numbers[0], numbers[-1] + 1)):
        return f"pages {numbers[0]}-{numbers[-1]} were"
    return f"{len(numbers)} pages were"
