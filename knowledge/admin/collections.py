"""The admin's collections: their readers (all staff, groups, users) and a link to their
documents; the default collection and a collection holding documents cannot be deleted."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from knowledge.models import Collection


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    """Collections and their readers; each collection's page lists its readers and links to
    its documents. The default collection ("General") cannot be deleted, nor can a collection
    that still holds documents (the admin shows which)."""

    list_display = ("name", "readers", "document_count", "is_default", "updated_at")
    list_filter = ("all_staff",)
    search_fields = ("name", "description")
    filter_horizontal = ("reader_groups", "reader_users")
    fields = ("name", "description", "all_staff", "reader_groups", "reader_users", "documents")
    readonly_fields = ("documents",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Collection]:
        return (
            super()
            .get_queryset(request)
            .annotate(document_total=Count("documents", distinct=True))
            .prefetch_related("reader_groups", "reader_users")
        )

    def has_delete_permission(self, request: HttpRequest, obj: Collection | None = None) -> bool:
        if obj is not None and obj.is_default:
            return False
        return super().has_delete_permission(request, obj)

    @admin.display(description="Readers")
    def readers(self, obj: Collection) -> str:
        if obj.all_staff:
            return "All staff"
        names = sorted(f"group {group.name}" for group in obj.reader_groups.all()) + sorted(
            f"user {user.get_username()}" for user in obj.reader_users.all()
        )
        return ", ".join(names) or "Nobody but superusers"

    @admin.display(description="Documents", ordering="document_total")
    def document_count(self, obj: Collection) -> str:
        total = getattr(obj, "document_total", None)
        total = obj.documents.count() if total is None else total
        url = reverse("admin:knowledge_document_changelist") + f"?collection__id__exact={obj.pk}"
        return format_html('<a href="{}">{}</a>', url, total)

    @admin.display(description="Documents")
    def documents(self, obj: Collection) -> str:
        """A link to the document list filtered to the collection (which shows each user only
        the documents they may read)."""
        if obj.pk is None:
            return "None yet."
        total = obj.documents.count()
        url = reverse("admin:knowledge_document_changelist") + f"?collection__id__exact={obj.pk}"
        return format_html('<a href="{}">{} document(s): open the list</a>', url, total)
