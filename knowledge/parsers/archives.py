"""Zip-based files (.docx, .xlsx, .pptx, and any other zip: OpenDocument too) checked by the
sizes their zip declares, before any parser opens them, and what every such format shares:
the document title of an Office Open XML package.

`document_parse` (knowledge/parsers/__init__.py) calls `zip_check` on every file of an office
extension (`ZIP_SUFFIXES`), whatever its bytes, and on every other file a zip reader would
open (`is_zip`: its end-of-central-directory record found as zipfile finds it, not its first
bytes), so a parser added later gets the check without calling it. A zip with bytes before
its first part is refused: zip readers open it all the same, and no office program writes one.
Python's zipfile never inflates a part past the size it declares, so a file that passes
cannot unpack to more than ZIP_MAX_UNCOMPRESSED_BYTES through zipfile, whichever library
reads it. Why these limits: docs/decisions/0095-one-zip-check-before-every-parser.md.
"""

from __future__ import annotations

import html
import io
import re
import zipfile
from pathlib import Path

from knowledge.parsers.base import DocumentParseError, error_reason

# Word, Excel and PowerPoint files unpack to a few times their size, pictures and media not
# at all; a few megabytes that would unpack to gigabytes are a "zip bomb".
ZIP_MAX_UNCOMPRESSED_BYTES = 256 * 1024 * 1024
ZIP_MAX_RATIO = 100  # uncompressed / compressed, for a part over ZIP_RATIO_FROM bytes
ZIP_RATIO_FROM = 10 * 1024 * 1024
ZIP_MAX_PARTS = 10_000

# Local file header, empty archive, spanned archive: how every zip file starts.
_ZIP_SIGNATURES = (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08")
# The extensions whose readers open the file as a zip: checked whatever the bytes say.
ZIP_SUFFIXES = frozenset({".docx", ".xlsx", ".pptx", ".odt", ".ods", ".odp"})

# The kind of file, as the error message names it, by extension.
_KINDS = {
    ".docx": "Word document",
    ".xlsx": "spreadsheet",
    ".pptx": "presentation",
    ".odt": "document",
    ".ods": "spreadsheet",
    ".odp": "presentation",
}

_CORE_PROPERTIES = re.compile(rb"Type=\"[^\"]*/metadata/core-properties\"")
_TARGET = re.compile(rb"Target=\"([^\"]+)\"")
_TITLE = re.compile(rb"<(?:\w+:)?title(?:\s[^>]*)?>([^<]*)</(?:\w+:)?title>")
_RELATIONSHIP = re.compile(rb"<(?:\w+:)?Relationship\s[^>]*>")


def is_zip(data: bytes) -> bool:
    """Whether a zip reader would open `data`: it starts like a zip, or zipfile finds an
    end-of-central-directory record in its last 64 KB (where zip readers look for it, so bytes
    put in front of a zip do not hide it)."""
    return data[:4] in _ZIP_SIGNATURES or zipfile.is_zipfile(io.BytesIO(data))


def zip_check(data: bytes, *, name: str) -> None:
    """Raise `DocumentParseError` when the zip `data` (the file called `name`) cannot be read
    as a zip, has more than ZIP_MAX_PARTS parts, declares more than ZIP_MAX_UNCOMPRESSED_BYTES
    unpacked, or has a part over ZIP_RATIO_FROM bytes compressed more than ZIP_MAX_RATIO to 1.
    Also refused: bytes before the zip's first part (a zip reader skips them; nothing an office
    program writes has them). Reads the zip's directory only: no part is inflated."""
    kind = _KINDS.get(Path(name).suffix.lower(), "file")
    suffix = Path(name).suffix.lower() or ".zip"
    # Spelt out, ".xlsx" and ".odt" start with a vowel sound ("an"), ".docx" does not.
    article = "an" if suffix[1:2] in tuple("aefhilmnorsx") else "a"
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            parts = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise DocumentParseError(
            f"Could not read the {kind}: the file is damaged or not {article} {suffix} file "
            f"({error_reason(exc)})."
        ) from exc
    start = min((part.header_offset for part in parts), default=0)
    if start > 0 or (parts and data[:4] != b"PK\x03\x04"):
        raise DocumentParseError(
            f"The {kind} has {max(start, 1):,} bytes of something else before its content: "
            f"it is not {article} {suffix} file an office program wrote."
        )
    if len(parts) > ZIP_MAX_PARTS:
        raise DocumentParseError(
            f"The {kind} has too many parts ({len(parts):,}; the limit is "
            f"{ZIP_MAX_PARTS:,}): it is not a document an office program wrote."
        )
    total = sum(part.file_size for part in parts)
    if total > ZIP_MAX_UNCOMPRESSED_BYTES:
        raise DocumentParseError(
            f"The {kind} would unpack to {total / 2**20:,.0f} MB (the limit is "
            f"{ZIP_MAX_UNCOMPRESSED_BYTES // 2**20} MB): it is a zip bomb or too large to "
            "read; split a genuine file into smaller ones."
        )
    for part in parts:
        if part.file_size > ZIP_RATIO_FROM and part.file_size > ZIP_MAX_RATIO * max(
            part.compress_size, 1
        ):
            raise DocumentParseError(
                f"The {kind}'s part {part.filename} is compressed "
                f"{part.file_size // max(part.compress_size, 1):,} to 1 (the limit is "
                f"{ZIP_MAX_RATIO} to 1): it looks like a zip bomb, not a document."
            )


def ooxml_title(data: bytes) -> str | None:
    """The title in an Office Open XML package's core properties (docProps/core.xml or
    wherever the package's relationships put them), or None when it has none. Unlike
    python-docx and python-pptx, never a placeholder ("Word Document") for a package written
    without core properties, and the relationship type is matched loosely (LibreOffice
    writes a variant). Reads small parts of a zip that `zip_check` passed."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
            target = "docProps/core.xml"
            if "_rels/.rels" in names:
                rels = archive.read("_rels/.rels")
                for relationship in _RELATIONSHIP.findall(rels):
                    if _CORE_PROPERTIES.search(relationship) and (
                        found := _TARGET.search(relationship)
                    ):
                        target = found.group(1).decode("utf-8", "replace").lstrip("/")
                        break
            if target not in names:
                return None
            match = _TITLE.search(archive.read(target))
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, EOFError):
        return None
    if not match:
        return None
    return html.unescape(match.group(1).decode("utf-8", "replace"))
