"""Files made to hurt, generated here (never checked in): a PDF whose one page is 11,000 pt
square with no text layer, a PNG whose header claims 25,000 × 25,000 pixels, a TIFF of many
large frames that decode from a few bytes each. Each is small on disk; what a reader would
allocate for it is what the bounds of docs/decisions/0145-bounds-before-allocation.md stop."""

from __future__ import annotations

import io
import struct
import zlib


def huge_page_pdf(points: float = 11_000) -> bytes:
    """A one-page PDF (a few hundred bytes) whose page is `points` × `points` (11,000 pt:
    3.9 m square) and holds no text: a reader takes it for a scan and renders it for OCR."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    writer.add_blank_page(width=points, height=points)
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data))
        + kind
        + data
        + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def png_claiming(width: int = 25_000, height: int = 25_000) -> bytes:
    """A greyscale PNG whose header claims `width` × `height` pixels (625 megapixels by
    default) and whose data is its first rows of zeros, deflated: well under a megabyte."""
    rows = min(height, 64)
    raw = b"".join(b"\x00" + bytes(width) for _ in range(rows))
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
        + _png_chunk(b"IDAT", zlib.compress(raw, 9))
        + _png_chunk(b"IEND", b"")
    )


def tiff_frames(sizes: list[tuple[int, int]]) -> bytes:
    """A multi-page bilevel TIFF, one frame per (width, height) in `sizes`, every frame white
    and PackBits-compressed (128 white pixels' bytes in 2 bytes): a 10,000 × 10,000 frame is
    about 200 KB on disk and 100 MB once decoded by Pillow (a byte per pixel). Frames of the
    same width share their strip on disk."""
    header = b"II*\x00"
    body = bytearray()
    strips: dict[int, tuple[int, int]] = {}  # width → (offset, length)
    offset_base = 8
    for width, height in sizes:
        if width in strips:
            continue
        row = (width + 7) // 8
        data = bytearray()
        for _ in range(height):
            left = row
            while left:
                run = min(left, 128)
                # PackBits: 257 - n then a byte repeats it n times; 0 then a byte is one byte.
                data += bytes([257 - run if run > 1 else 0, 0])
                left -= run
        strips[width] = (offset_base + len(body), len(data))
        body += data
    ifds = bytearray()
    ifd_start = offset_base + len(body)
    entries_per_ifd = 10
    ifd_size = 2 + entries_per_ifd * 12 + 4
    for index, (width, height) in enumerate(sizes):
        strip_offset, strip_length = strips[width]
        tags = [
            (256, 4, 1, width),  # ImageWidth
            (257, 4, 1, height),  # ImageLength
            (258, 3, 1, 1),  # BitsPerSample
            (259, 3, 1, 32773),  # Compression: PackBits
            (262, 3, 1, 0),  # PhotometricInterpretation: WhiteIsZero
            (273, 4, 1, strip_offset),  # StripOffsets
            (277, 3, 1, 1),  # SamplesPerPixel
            (278, 4, 1, height),  # RowsPerStrip
            (279, 4, 1, strip_length),  # StripByteCounts
            (284, 3, 1, 1),  # PlanarConfiguration
        ]
        following = ifd_start + (index + 1) * ifd_size if index + 1 < len(sizes) else 0
        ifds += struct.pack("<H", len(tags))
        for tag, kind, count, value in tags:
            packed = (
                struct.pack("<H", value) + b"\x00\x00" if kind == 3 else struct.pack("<I", value)
            )
            ifds += struct.pack("<HHI", tag, kind, count) + packed
        ifds += struct.pack("<I", following)
    return header + struct.pack("<I", ifd_start) + bytes(body) + bytes(ifds)


# --- Parsers made to hurt, put in place of a real one (`parsers.PARSERS[suffix]`) by the tests
# of knowledge/parsers/isolated.py. Module-level, so that they reach the parsing child by name.

HUNGRY_STEP = 32 * 2**20


def parse_hungry(data: bytes, builder) -> str | None:
    """Allocates memory and writes to it, 32 MB at a time, up to 1 GB (a bomb nobody has
    thought of yet, with a cap so that a run without the child's limit ends); then reads."""
    held = [b"\x01" * HUNGRY_STEP for _ in range(2**30 // HUNGRY_STEP)]
    builder.add(f"Survived {len(held) * HUNGRY_STEP // 2**20} MB.")
    return None


def parse_reporting_modules(data: bytes, builder) -> str | None:
    """Reads into the text which of the heavy or connected modules the process has loaded."""
    import sys

    watched = ("onnxruntime", "knowledge.embedding", "psycopg", "django.db.backends.postgresql")
    loaded = [name for name in watched if name in sys.modules]
    builder.add(f"Loaded: {', '.join(loaded) or 'none'}.")
    return None


def parse_stuck(data: bytes, builder) -> str | None:
    """Never returns and ignores SIGALRM (as a call stuck in C code would)."""
    import signal
    import time

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    while True:
        time.sleep(1)


def parse_dying(data: bytes, builder) -> str | None:
    """Dies as a reader's C code does when it aborts."""
    import os
    import signal

    os.kill(os.getpid(), signal.SIGABRT)
    return None


def parse_crashing(data: bytes, builder) -> str | None:
    """Fails as a library's bug does, with a message naming a path of the server."""
    raise KeyError("/srv/sourced/.venv/lib/python3.11/site-packages/somewhere.py")
