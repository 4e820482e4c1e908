"""Turn a document's bytes into text blocks that remember where they came from.

Every parser returns a `ParsedDocument`: the extracted text and its blocks (paragraphs, list
items, table rows, code blocks), each with its page (PDF) or section (heading path such as
"Handbook > Leave > Annual leave" for Markdown, HTML and DOCX) and its character offsets
into the extracted text. Chunking never lets a chunk cross from one page or section to the
next, so these two fields are what citations point at.

Spreadsheet blocks (.xlsx, .csv; knowledge/parsers/spreadsheets.py) are rows, each with its `sheet`
and the `cells` it covers ("A4:E4"); slides (.pptx; knowledge/parsers/slides.py) have the slide
number as their page and the slide's title as their section.

Scanned pages of a PDF and images (.png, .jpg/.jpeg, .tif/.tiff) are read by OCR
(knowledge/parsers/ocr.py): their blocks carry the page and the OCR's `ocr_confidence`.
OpenDocument text and spreadsheets (.odt, .ods; knowledge/parsers/opendocument.py) read like
their Office counterparts (sections; sheets and cells).

Supported: .pdf, .md/.markdown, .html/.htm, .txt, .docx, .odt, .xlsx, .ods, .csv, .pptx,
.png, .jpg/.jpeg, .tif/.tiff. Anything else
is refused with an `UnsupportedFileType`; a corrupt or empty file raises a
`DocumentParseError` whose message is meant for the person who gave us the file.

This module picks the parser by the file's extension (`PARSERS`, one module per format),
checks every zip-based file before its parser opens it (knowledge/parsers/archives.py) and
stops a parser still busy after PARSE_TIME_LIMIT_SECONDS (in the main thread; see
docs/decisions/0099-other-writers-files-read-or-refused-readably.md); what the parsers share
is in knowledge/parsers/base.py.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from knowledge.parsers.archives import (
    ZIP_MAX_PARTS,
    ZIP_MAX_RATIO,
    ZIP_MAX_UNCOMPRESSED_BYTES,
    ZIP_SUFFIXES,
    is_zip,
    zip_check,
)
from knowledge.parsers.base import (
    HTML_MAX_DEPTH,
    SECTION_SEPARATOR,
    Block,
    BlockBuilder,
    DocumentParseError,
    ParsedDocument,
    UnsupportedFileType,
    clean_inline,
)
from knowledge.parsers.docx import parse_docx
from knowledge.parsers.html import parse_html
from knowledge.parsers.images import parse_image
from knowledge.parsers.markdown import parse_markdown
from knowledge.parsers.opendocument import parse_ods, parse_odt
from knowledge.parsers.pdf import parse_pdf
from knowledge.parsers.slides import parse_pptx
from knowledge.parsers.spreadsheets import parse_csv, parse_xlsx
from knowledge.parsers.text import parse_text

__all__ = [
    "HTML_MAX_DEPTH",
    "PARSERS",
    "PARSE_TIME_LIMIT_SECONDS",
    "SECTION_SEPARATOR",
    "SUPPORTED_TYPES",
    "SUPPORTED_TYPES_LABEL",
    "Block",
    "DocumentParseError",
    "ParsedDocument",
    "UnsupportedFileType",
    "ZIP_MAX_PARTS",
    "ZIP_MAX_RATIO",
    "ZIP_MAX_UNCOMPRESSED_BYTES",
    "document_parse",
    "file_type_check",
    "is_supported",
]

SUPPORTED_TYPES: dict[str, str] = {
    ".pdf": "application/pdf",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".txt": "text/plain",
    ".docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ".xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ".csv": "text/csv",
    ".pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    ".odt": "application/vnd.oasis.opendocument.text",
    ".ods": "application/vnd.oasis.opendocument.spreadsheet",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".tif": "image/tiff",
    ".tiff": "image/tiff",
}
SUPPORTED_TYPES_LABEL = (
    ".pdf, .md/.markdown, .html/.htm, .txt, .docx, .xlsx, .csv, .pptx, .odt, .ods, "
    ".png, .jpg/.jpeg, .tif/.tiff"
)
logger = logging.getLogger(__name__)

# A parser still busy after this long (a pathological file) is stopped: the file fails with a
# readable error well before the worker's document counts as stalled (15 minutes without
# progress). OCR has a budget of its own (OCR_MAX_SECONDS): the limit leaves it a minute more.
PARSE_TIME_LIMIT_SECONDS = 600.0


def parse_time_limit(suffix: str) -> float:
    """Seconds the parser of a file ending in `suffix` may run: PARSE_TIME_LIMIT_SECONDS, or
    for a format OCR may read, its budget (OCR_MAX_SECONDS) and a minute when that is longer."""
    if suffix in OCR_SUFFIXES:
        return max(PARSE_TIME_LIMIT_SECONDS, float(settings.OCR_MAX_SECONDS) + 60.0)
    return PARSE_TIME_LIMIT_SECONDS


# The parser of each extension: it adds the file's blocks to the builder and returns the
# document's own title when it has one.
PARSERS: dict[str, Callable[[bytes, BlockBuilder], str | None]] = {
    ".pdf": parse_pdf,
    ".md": parse_markdown,
    ".markdown": parse_markdown,
    ".html": parse_html,
    ".htm": parse_html,
    ".txt": parse_text,
    ".docx": parse_docx,
    ".xlsx": parse_xlsx,
    ".csv": parse_csv,
    ".pptx": parse_pptx,
    ".odt": parse_odt,
    ".ods": parse_ods,
    ".png": parse_image,
    ".jpg": parse_image,
    ".jpeg": parse_image,
    ".tif": parse_image,
    ".tiff": parse_image,
}
# The formats whose pages may be read by OCR, which has a time budget of its own: those the PDF
# and image parsers read.
OCR_SUFFIXES = frozenset(
    suffix for suffix, parser in PARSERS.items() if parser in (parse_pdf, parse_image)
)


def file_type_check(name: str) -> str:
    """The media type for `name`'s extension, or `UnsupportedFileType` naming what is supported."""
    suffix = Path(name).suffix.lower()
    if suffix not in SUPPORTED_TYPES:
        shown = f"'{suffix}'" if suffix else "without an extension"
        raise UnsupportedFileType(
            f"Unsupported file type {shown} ({Path(name).name}). "
            f"Supported types: {SUPPORTED_TYPES_LABEL}."
        )
    return SUPPORTED_TYPES[suffix]


def is_supported(name: str) -> bool:
    return Path(name).suffix.lower() in SUPPORTED_TYPES


def document_parse(
    *, data: bytes, name: str, progress: Callable[[str], None] | None = None
) -> ParsedDocument:
    """Parse `data`, the bytes of a file called `name` (its extension picks the parser).
    `progress` is told what a slow parser is doing ("OCR: page 3 of 10", then "" when done).

    Raises `UnsupportedFileType` for an extension no parser reads, `DocumentParseError` (a
    message for the person who gave the file) for an empty, damaged or hostile one. Any file
    whose bytes open like a zip is checked by `zip_check` (the sizes its zip declares) before
    its parser sees it, whatever the parser, and so is any file of an office extension
    (`ZIP_SUFFIXES`) whatever its bytes. PDFs and images are not: their readers never open a
    zip, and a zip's last bytes can occur by chance in their compressed data."""
    media_type = file_type_check(name)
    if not data.strip():
        raise DocumentParseError(f"The file is empty ({Path(name).name}).")
    suffix = Path(name).suffix.lower()
    if suffix in ZIP_SUFFIXES or (suffix not in OCR_SUFFIXES and is_zip(data)):
        zip_check(data, name=Path(name).name)
    parser = PARSERS[Path(name).suffix.lower()]
    builder = BlockBuilder(name=Path(name).name, progress=progress)
    try:
        with _time_limit(limit := parse_time_limit(Path(name).suffix.lower())):
            title = parser(data, builder)
    except _TimeUp:
        raise DocumentParseError(
            f"Reading {Path(name).name} took longer than {limit:g} s: the "
            "file is too large or too complex to read."
        ) from None
    except (DocumentParseError, MemoryError):  # out of memory: the caller's to say
        raise
    except Exception as exc:  # a reader's own bug on odd input: that file fails, readably
        logger.exception("Parsing %s failed unexpectedly", name)
        raise DocumentParseError(
            f"Could not read {Path(name).name}: the file is damaged or in a form we cannot "
            f"read ({type(exc).__name__})."
        ) from exc
    if not builder.blocks:
        raise DocumentParseError(f"No text could be extracted from {Path(name).name}.")
    return ParsedDocument(
        text=builder.text(),
        blocks=builder.blocks,
        title=(clean_inline(title)[:300] or None) if title else None,
        media_type=media_type,
        metadata=builder.metadata,
    )


class _TimeUp(BaseException):
    """Raised in the parsing thread when its time is up: a BaseException, so that parsers'
    own `except Exception` (which turns a library's errors into "damaged file") lets it by."""


@contextmanager
def _time_limit(seconds: float) -> Iterator[None]:
    """Raise `_TimeUp` in the block after `seconds` (a SIGALRM timer). Only in the main
    thread, where signals are delivered (the worker, the `ingest` command); elsewhere the
    block runs unlimited. A pure-Python loop is interrupted between two bytecodes; a call into
    C code when it returns. The previous SIGALRM handler is restored."""
    if threading.current_thread() is not threading.main_thread() or seconds <= 0:
        yield
        return

    def time_up(signum, frame) -> None:
        raise _TimeUp

    previous = signal.signal(signal.SIGALRM, time_up)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
