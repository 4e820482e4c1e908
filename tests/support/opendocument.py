"""OpenDocument files for the tests: the ones LibreOffice wrote (committed under
tests/knowledge/files/opendocument/, made by its make.py), and spreadsheets written here by
hand, XML and all, to hold what LibreOffice writes at sizes a test could not otherwise hold
(a million padding rows in one element)."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

FILES = Path(__file__).resolve().parents[1] / "knowledge" / "files" / "opendocument"

_CONTENT = """<?xml version="1.0" encoding="UTF-8"?>
<office:document-content
 xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.3">
<office:body><office:spreadsheet><table:table table:name="{name}">{rows}</table:table>
</office:spreadsheet></office:body></office:document-content>"""

MIMETYPE = "application/vnd.oasis.opendocument.spreadsheet"


def cell(text: str = "", *, repeat: int = 1) -> str:
    """A string cell (an empty one when `text` is empty), repeated `repeat` times."""
    repeated = f' table:number-columns-repeated="{repeat}"' if repeat > 1 else ""
    if not text:
        return f"<table:table-cell{repeated}/>"
    return (
        f'<table:table-cell office:value-type="string"{repeated}>'
        f"<text:p>{text}</text:p></table:table-cell>"
    )


def row(*cells: str, repeat: int = 1) -> str:
    """A row of `cells` (from `cell`), repeated `repeat` times."""
    repeated = f' table:number-rows-repeated="{repeat}"' if repeat > 1 else ""
    return f"<table:table-row{repeated}>{''.join(cells)}</table:table-row>"


def ods_bytes(*rows: str, name: str = "Sheet1", extra: dict[str, bytes] | None = None) -> bytes:
    """An .ods file with one sheet `name` holding `rows` (from `row`); `extra` parts added."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", MIMETYPE, compress_type=zipfile.ZIP_STORED)
        archive.writestr("content.xml", _CONTENT.format(name=name, rows="".join(rows)))
        for part, data in (extra or {}).items():
            archive.writestr(part, data)
    return buffer.getvalue()


_TEXT_CONTENT = """<?xml version="1.0" encoding="UTF-8"?>
<office:document-content
 xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:style="urn:oasis:names:tc:opendocument:xmlns:style:1.0"
 xmlns:fo="urn:oasis:names:tc:opendocument:xmlns:xsl-fo-compatible:1.0"
 xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.3">
<office:automatic-styles>{styles}</office:automatic-styles>
<office:body><office:text>{body}</office:text></office:body></office:document-content>"""


def odt_bytes(body: str, *, styles: str = "") -> bytes:
    """An .odt file whose text body is the XML `body` (text: and table: elements), with the
    automatic styles `styles`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(
            "mimetype", "application/vnd.oasis.opendocument.text", compress_type=zipfile.ZIP_STORED
        )
        archive.writestr("content.xml", _TEXT_CONTENT.format(body=body, styles=styles))
    return buffer.getvalue()
