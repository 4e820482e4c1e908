"""Document pages: a document's passages in order (the cited one highlighted) and its original
file. Staff only, like the chat; a disabled document only for staff who may see documents in
the admin (it is out of the knowledge base for everyone else). A spreadsheet's passages are
shown as its sheets' tables, the cited rows highlighted (`?chunk=<id>&cells=A4:E4`)."""

from __future__ import annotations

import contextlib

from django.http import FileResponse, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.clickjacking import xframe_options_sameorigin

from knowledge.media_types import media_type_name
from knowledge.selectors import (
    document_get_for,
    document_original_name,
    document_original_open,
    document_original_path,
    document_sheet_tables,
    document_source_label,
)
from pages import no_access, safe_external_url, sidebar_context, staff_required
from pages.client_input import client_int

# Shown in the browser (a PDF opens at the cited page); everything else is downloaded, so a
# document's own HTML or script can never run on this site.
INLINE_MEDIA_TYPES = {"application/pdf"}


def document_not_found(request: HttpRequest) -> HttpResponse:
    return no_access(
        request, reason="This document is no longer in the knowledge base.", status=404
    )


@staff_required
def document_detail(request: HttpRequest, pk: int) -> HttpResponse:
    document = document_get_for(request.user, pk)
    if document is None:
        return document_not_found(request)
    chunks = list(
        document.chunks.order_by("index").only(
            "pk", "index", "text", "page", "section", "sheet", "cells"
        )
    )
    highlighted: int | None = None
    with contextlib.suppress(ValueError):  # anything but a chunk id highlights nothing
        highlighted = client_int(request.GET.get("chunk", ""), minimum=1)
    highlighted_missing = highlighted is not None and all(c.pk != highlighted for c in chunks)
    sheet_tables = document_sheet_tables(
        document=document,
        chunks=chunks,
        highlighted=highlighted,
        cells=request.GET.get("cells", "")[:40],
    )
    file_url = ""
    if document_original_path(document) is not None:
        file_url = reverse("knowledge:document_file", kwargs={"pk": document.pk})
    context = {
        "document": document,
        "chunks": chunks,
        "highlighted": highlighted,
        "highlighted_missing": highlighted_missing,
        "sheet_tables": sheet_tables,
        "file_url": file_url,
        "external_url": safe_external_url(document.url),
        "source_label": document_source_label(document.source),
        "kind": media_type_name(document.media_type),
        **sidebar_context(request.user),
    }
    return render(request, "knowledge/document.html", context)


@xframe_options_sameorigin
@staff_required
def document_file(request: HttpRequest, pk: int) -> HttpResponse:
    document = document_get_for(request.user, pk)
    original = document_original_open(document) if document is not None else None
    if original is None:
        return document_not_found(request)
    inline = document.media_type in INLINE_MEDIA_TYPES
    response = FileResponse(
        original,
        as_attachment=not inline,
        filename=document_original_name(document),
        content_type=document.media_type if inline else "application/octet-stream",
    )
    # A download is sandboxed (an HTML or SVG file could hold script); a PDF shown by the
    # browser's own viewer gets a policy that lets the viewer work, framed by this origin only.
    response["Content-Security-Policy"] = "sandbox" if not inline else "frame-ancestors 'self'"
    return response
