"""Citations as stored (a snapshot of the cited chunk) and as every transport shows them.

The `sources` event of a fresh answer and a reload of the conversation both render stored
`Citation` rows through `citation_as_dict`, so they are identical, also after the cited
document was re-ingested, disabled, expired or deleted (then `stale` says the source has
changed). A spreadsheet citation also names its `sheet` and `cells`: the rows the answer
quotes ("A4:E4"), within the cited chunk's range. A citation of text read by OCR from a
scanned page keeps its `ocr_confidence` (else None). `chunk_index` is the cited chunk's
position in its document when it was cited (None for citations stored before it was kept).
"""

from __future__ import annotations

import re
from typing import Any

from django.urls import NoReverseMatch

from chat.models import Citation, Message
from chat.templatetags.chat_urls import id_url
from knowledge.models import Document
from knowledge.retrieval import RetrievedChunk, excerpt_of
from knowledge.sentences import text_hash

SIMILARITY_DECIMALS = 4
# What every reader of an answer takes for a citation marker: "[3]", "[1, 2]".
_MARKER_LIKE = re.compile(r"\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]")
WORD_JOINER = "\u2060"


def quoted_markers_neutralize(text: str) -> str:
    """Document text quoted in an answer (or given to a model as a source), with its own
    bracketed numbers ("see footnote [2]") written "[2\u2060]": they look the same, but no
    reader of the answer, the page's badges, an API client or the citation check, takes them
    for a marker naming a source."""
    return _MARKER_LIKE.sub(lambda match: f"[{match.group(1)}{WORD_JOINER}]", text)


def document_link(document_id: int, document_url: str) -> str:
    """Where a reader opens the source: its own URL, else the app's document page (if any)."""
    if document_url:
        return document_url
    try:
        return id_url("knowledge:document", document_id)
    except NoReverseMatch:
        return ""


def citation_build(*, message: Message, n: int, chunk: RetrievedChunk) -> Citation:
    """An unsaved Citation holding the snapshot of `chunk`."""
    return Citation(
        message=message,
        chunk_id=chunk.chunk_id,
        chunk_id_snapshot=chunk.chunk_id,
        n=n,
        similarity=float(chunk.similarity or 0.0),
        document_id_snapshot=chunk.document_id,
        document_title=chunk.document_title[:300],
        page=chunk.page,
        section=chunk.section[:1000] if chunk.section else chunk.section,
        sheet=chunk.sheet[:255] if chunk.sheet else chunk.sheet,
        cells=chunk.cells[:40] if chunk.cells else chunk.cells,
        ocr_confidence=chunk.ocr_confidence,
        url=document_link(chunk.document_id, chunk.document_url)[:1000],
        chunk_index=chunk.chunk_index,
        text=chunk.text,
        text_hash=text_hash(chunk.text),
    )


def citation_is_stale(citation: Citation) -> bool:
    """The cited chunk is gone, or its text changed, or its document is no longer searchable
    (disabled, not ready, expired).

    Expects `chunk__document` to be loaded (select_related) to avoid a query per citation.
    """
    chunk = citation.chunk
    if chunk is None:
        return True
    if chunk.text != citation.text:
        return True
    document = chunk.document
    searchable = document.enabled and document.status == Document.Status.READY
    return not searchable or document.is_expired


def citation_as_dict(citation: Citation, *, stale: bool | None = None) -> dict[str, Any]:
    if stale is None:
        stale = citation_is_stale(citation)
    return {
        "n": citation.n,
        "chunk_id": citation.chunk_id_snapshot,
        "chunk_index": citation.chunk_index,
        "document_id": citation.document_id_snapshot,
        "title": citation.document_title,
        "page": citation.page,
        "section": citation.section,
        "sheet": citation.sheet,
        "cells": citation.cells,
        "ocr_confidence": citation.ocr_confidence,
        "url": citation.url,
        "excerpt": excerpt_of(citation.text),
        "text": citation.text,
        "similarity": round(citation.similarity, SIMILARITY_DECIMALS),
        "stale": stale,
    }
