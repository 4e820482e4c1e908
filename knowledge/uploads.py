"""An upload's size refused before its body is read, for the admin's upload page
(knowledge/admin/documents.py, docs/decisions/0097-admin-upload-size-before-spooling.md) and for
personal files (`POST /api/files`, chat/api/files.py, docs/decisions/0148): the size the request
declares (`declared_size`) is checked before anything reads the body, and `UploadLimitHandler`
keeps at most the limit of a file whose request declared no size or lied about it."""

from __future__ import annotations

import io

from django.core.files.uploadedfile import InMemoryUploadedFile
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest

# What an upload form adds to a request's body besides the file (its other fields, the
# multipart boundaries): a request declaring more than the size limit plus this is refused
# before its body is read.
UPLOAD_FORM_ALLOWANCE = 64 * 1024


def declared_size(request: HttpRequest) -> int:
    """The body size `request` declares (its Content-Length), 0 when it declares none."""
    try:
        return max(0, int(request.META.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return 0


class UploadLimitHandler(FileUploadHandler):
    """The first upload handler of an upload: hands a file's bytes on to Django's own
    handlers (memory, temporary file) up to `limit`, then drops the rest, so no more than
    `limit` bytes of a file are ever kept, and gives the form a stand-in with the size read
    (and no content) for it to refuse as too large."""

    def __init__(self, request: HttpRequest, *, limit: int) -> None:
        super().__init__(request)
        self.limit = limit

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        return raw_data if start + len(raw_data) <= self.limit else None

    def file_complete(self, file_size: int) -> InMemoryUploadedFile | None:
        if file_size <= self.limit:
            return None  # the next handler's file
        return InMemoryUploadedFile(
            io.BytesIO(), self.field_name, self.file_name, self.content_type, file_size, None
        )
