"""The admin's personal files, for superusers: each file's owner, name, size, state and expiry
(never its text or its file), and the single row of personal file settings (their time to live).
"""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponseRedirect
from django.template.defaultfilters import filesizeformat
from django.urls import reverse

from knowledge.access import personal_files_filter
from knowledge.admin.documents import type_column
from knowledge.models import PersonalFile, PersonalFileSettings


@admin.register(PersonalFile)
class PersonalFileAdmin(admin.ModelAdmin):
    """Users' personal files, for superusers: who owns them, their name, size, state and
    expiry; never their text or their file (docs/decisions/0081-personal-files.md)."""

    list_display = ("title", "owner", "size_label", "status", "expires_at", "purged_at")
    list_filter = ("status",)
    search_fields = ("title", "owner__username")
    fields = ("title", "owner", "size_label", "kind", "status", "error", "created_at",
              "expires_at", "purged_at")  # fmt: skip
    readonly_fields = fields
    list_select_related = ("owner",)
    kind = type_column

    def get_queryset(self, request: HttpRequest) -> QuerySet[PersonalFile]:
        return super().get_queryset(request).filter(personal_files_filter())

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    @admin.display(description="Size", ordering="size")
    def size_label(self, obj: PersonalFile) -> str:
        return filesizeformat(obj.size)


@admin.register(PersonalFileSettings)
class PersonalFileSettingsAdmin(admin.ModelAdmin):
    """A single row: the list page opens it directly; it shows the value in force."""

    fields = ("ttl_hours", "in_force", "updated_at")
    readonly_fields = ("in_force", "updated_at")

    @admin.display(description="In force")
    def in_force(self, obj: PersonalFileSettings) -> str:
        from knowledge.personal import personal_file_ttl

        hours = personal_file_ttl().total_seconds() / 3600
        source = "set here" if obj.ttl_hours else "from PERSONAL_FILE_TTL"
        return f"{hours:g} hours ({source})"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context=None) -> HttpResponseRedirect:
        row, _ = PersonalFileSettings.objects.get_or_create(pk=1)
        return HttpResponseRedirect(
            reverse("admin:knowledge_personalfilesettings_change", args=[row.pk])
        )

    def response_change(self, request: HttpRequest, obj: PersonalFileSettings):
        self.message_user(request, "Personal file settings saved.")
        return HttpResponseRedirect(request.path)
