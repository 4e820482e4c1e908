"""The admin's chunks: what ingestion made of a document, readable by whoever may see
documents (only those of the collections they may read), never edited or deleted on their own.
"""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.text import Truncator

from knowledge.access import documents_readable_filter
from knowledge.models import Chunk


@admin.register(Chunk)
class ChunkAdmin(admin.ModelAdmin):
    """Chunks are what ingestion made of a document: readable, never edited by hand."""

    list_display = ("document", "index", "page", "section", "token_count", "excerpt")
    list_display_links = ("index",)
    list_filter = (("document", admin.RelatedOnlyFieldListFilter),)
    search_fields = ("text", "section", "document__title")
    ordering = ("document__title", "document_id", "index")
    list_select_related = ("document",)
    list_per_page = 50
    fields = (
        "document",
        "index",
        "page",
        "section",
        "sheet",
        "cells",
        "char_start",
        "char_end",
        "token_count",
        "text_hash",
        "text",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Chunk]:
        return (
            super()
            .get_queryset(request)
            .filter(documents_readable_filter(user=request.user, prefix="document__"))
        )

    @admin.display(description="Text")
    def excerpt(self, obj: Chunk) -> str:
        return Truncator(" ".join(obj.text.split())).chars(120)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Chunk | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Chunk | None = None) -> bool:
        # Chunks go with their document: whoever may delete documents may delete their chunks
        # (the admin checks this for the cascade), but chunks have no delete page or action
        # of their own (see delete_view, get_actions and change_view).
        return request.user.has_perm("knowledge.delete_document")

    def delete_view(self, request: HttpRequest, object_id: str, extra_context=None):
        raise PermissionDenied("Chunks are deleted with their document, never on their own.")

    def get_actions(self, request: HttpRequest) -> dict:
        return {}

    def change_view(self, request: HttpRequest, object_id: str, form_url="", extra_context=None):
        extra_context = {**(extra_context or {}), "show_delete": False}
        return super().change_view(request, object_id, form_url, extra_context)

    def has_view_permission(self, request: HttpRequest, obj: Chunk | None = None) -> bool:
        # Whoever may see documents may read their chunks.
        return super().has_view_permission(request, obj) or any(
            request.user.has_perm(f"knowledge.{action}_document") for action in ("view", "change")
        )
