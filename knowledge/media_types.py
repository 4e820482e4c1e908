"""What a document's media type is called in people's words ("PDF", "Word document"), for the
admin and the document page: the stored `Document.media_type` stays the MIME type."""

from __future__ import annotations

MEDIA_TYPE_NAMES: dict[str, str] = {
    "application/pdf": "PDF",
    "text/markdown": "Markdown",
    "text/html": "Web page",
    "text/plain": "Plain text",
    "text/csv": "CSV table",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "Word document",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "Excel workbook",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": (
        "PowerPoint presentation"
    ),
    "application/vnd.oasis.opendocument.text": "OpenDocument text",
    "application/vnd.oasis.opendocument.spreadsheet": "OpenDocument spreadsheet",
    "image/png": "PNG image",
    "image/jpeg": "JPEG image",
    "image/tiff": "TIFF image",
}


def media_type_name(media_type: str) -> str:
    """The name of `media_type` for people: "Word document" for a .docx's type; an unknown
    type is shown as it is ("" when there is none)."""
    return MEDIA_TYPE_NAMES.get(media_type, media_type)
