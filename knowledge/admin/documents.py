"""The admin's documents: upload them (processed in the background) into a collection,
enable/disable them, move them between collections, follow their status, re-process them.
Outside superusers, only the documents of the collections the user may read
(knowledge/access.py); document text reaches the page only through autoescaping.
"""

from __future__ import annotations

import uuid
from pathlib import Path

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponseRedirect
from django.template.defaultfilters import filesizeformat
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.decorators import method_decorator
from django.utils.html import format_html
from django.utils.text import Truncator
from django.views.decorators.csrf import csrf_protect

from knowledge.access import (
    collections_readable,
    documents_readable_filter,
    personal_files_filter,
)
from knowledge.collections import collection_default, documents_move
from knowledge.media_types import media_type_name
from knowledge.models import (
    Collection,
    Document,
)
from knowledge.parsers import SUPPORTED_TYPES_LABEL, UnsupportedFileType, file_type_check
from knowledge.parsers.ocr import ocr_summary
from knowledge.selectors import document_is_stalled, documents_in_progress
from knowledge.services import (
    document_processing_enqueue,
    documents_reprocess,
    documents_set_enabled,
)
from knowledge.uploads import UPLOAD_FORM_ALLOWANCE, UploadLimitHandler, declared_size

STATUS_COLOURS = {
    Document.Status.PENDING: ("#6b7280", "#f3f4f6"),
    Document.Status.PROCESSING: ("#1d4ed8", "#dbeafe"),
    Document.Status.READY: ("#15803d", "#dcfce7"),
    Document.Status.FAILED: ("#b91c1c", "#fee2e2"),
}
REFRESH_SECONDS = 5


class DocumentUploadForm(forms.ModelForm):
    """The add page: a file, an optional title (else the document's own title), its collection
    (the default one when none is chosen) and whether it may be cited."""

    file = forms.FileField(
        label="File",
        help_text=f"Supported types: {SUPPORTED_TYPES_LABEL}.",
    )
    title = forms.CharField(
        max_length=300,
        required=False,
        help_text="Leave empty to use the document's own title (or its file name).",
    )

    class Meta:
        model = Document
        fields = ("file", "title", "collection", "enabled", "expires_at")

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["collection"].required = False
        self.fields[
            "collection"
        ].help_text = (
            "Who may read the document. Empty: the default collection (readable by all staff)."
        )

    def clean_collection(self) -> Collection:
        return self.cleaned_data.get("collection") or collection_default()

    def clean_file(self):
        upload = self.cleaned_data["file"]
        name = Path(upload.name).name
        try:
            file_type_check(name)
        except UnsupportedFileType as exc:
            raise forms.ValidationError(str(exc), code="unsupported_type") from exc
        limit = settings.DOCUMENT_MAX_UPLOAD_BYTES
        if upload.size > limit:
            raise forms.ValidationError(
                f"The file is too large ({filesizeformat(upload.size)}); the limit is "
                f"{filesizeformat(limit)}.",
                code="too_large",
            )
        if upload.size == 0:
            raise forms.ValidationError("The file is empty.", code="empty")
        return upload

    def clean_title(self) -> str:
        return " ".join(self.cleaned_data.get("title", "").split())


class DocumentChangeForm(forms.ModelForm):
    class Meta:
        model = Document
        fields = ("title", "collection", "enabled", "expires_at")


class MoveToCollectionForm(forms.Form):
    """The intermediate page of the "move to collection" action: the collection to move to,
    among those the user may read."""

    collection = forms.ModelChoiceField(queryset=Collection.objects.none(), empty_label=None)

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["collection"].queryset = collections_readable(user=user).order_by("name")


class ExpiryFilter(admin.SimpleListFilter):
    title = "expiry"
    parameter_name = "expiry"

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        return [("expired", "Expired"), ("expires", "Expires later"), ("never", "Never expires")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Document]):
        now = timezone.now()
        if self.value() == "expired":
            return queryset.filter(expires_at__lte=now)
        if self.value() == "expires":
            return queryset.filter(expires_at__gt=now)
        if self.value() == "never":
            return queryset.filter(expires_at__isnull=True)
        return queryset


class KindFilter(admin.SimpleListFilter):
    """The documents of one kind, named in people's words ("Word document", not its MIME
    type); only the kinds present are offered."""

    title = "type"
    parameter_name = "kind"

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        queryset = model_admin.get_queryset(request).order_by()
        present = queryset.values_list("media_type", flat=True).distinct()
        kinds = sorted(present, key=media_type_name)
        return [(kind, media_type_name(kind)) for kind in kinds if kind]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Document]):
        if self.value():
            return queryset.filter(media_type=self.value())
        return queryset


@admin.display(description="Type", ordering="media_type")
def type_column(_model_admin: admin.ModelAdmin, obj: Document) -> str:
    """A document's type in people's words (a method of the admins that show it)."""
    return media_type_name(obj.media_type)


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    add_form = DocumentUploadForm
    form = DocumentChangeForm
    change_list_template = "admin/knowledge/document/change_list.html"
    list_display = (
        "display_title",
        "status_badge",
        "collection",
        "enabled",
        "expiry",
        "chunk_count",
        "kind",
        "updated_at",
        "error_summary",
    )
    list_display_links = ("display_title",)
    list_filter = ("collection", "status", "enabled", ExpiryFilter, KindFilter)
    search_fields = ("title", "source")
    ordering = ("-updated_at", "-id")
    list_per_page = 50
    kind = type_column
    actions = (
        "enable_documents",
        "disable_documents",
        "reprocess_documents",
        "move_to_collection",
    )
    readonly_fields = (
        "status_badge",
        "error",
        "ocr",
        "chunks_link",
        "source",
        "sync_root",
        "kind",
        "stored_file",
        "content_hash",
        "metadata",
        "uploaded_by",
        "created_at",
        "updated_at",
    )
    add_fieldsets = ((None, {"fields": ("file", "title", "collection", "enabled", "expires_at")}),)
    fieldsets = (
        (None, {"fields": ("title", "collection", "enabled", "expires_at")}),
        ("Processing", {"fields": ("status_badge", "error", "ocr", "chunks_link")}),
        (
            "Origin",
            {
                "fields": (
                    "source",
                    "sync_root",
                    "kind",
                    "stored_file",
                    "content_hash",
                    "metadata",
                    "uploaded_by",
                    "created_at",
                    "updated_at",
                )
            },
        ),
    )

    # --- Pages -------------------------------------------------------------------------
    def add_view(self, request: HttpRequest, form_url: str = "", extra_context=None):
        """The upload page. A POST declaring a body over DOCUMENT_MAX_UPLOAD_BYTES (plus the
        form's allowance) is refused with a message before any of it is read; any other gets
        `UploadLimitHandler` first, so a file over the limit is never kept whole. The CSRF
        check runs after this (in `_add_view_checked`): upload handlers can only be set
        before the body is read, and checking the token reads it."""
        if request.method == "POST":
            limit = settings.DOCUMENT_MAX_UPLOAD_BYTES
            declared = declared_size(request)
            if declared > limit + UPLOAD_FORM_ALLOWANCE:
                self.message_user(
                    request,
                    f"The file is too large ({filesizeformat(declared)}); the limit is "
                    f"{filesizeformat(limit)}. Nothing was uploaded.",
                    messages.ERROR,
                )
                return HttpResponseRedirect(request.get_full_path())
            request.upload_handlers.insert(0, UploadLimitHandler(request, limit=limit))
        return self._add_view_checked(request, form_url, extra_context)

    add_view.csrf_exempt = True  # checked by _add_view_checked, once the handlers are set

    @method_decorator(csrf_protect)
    def _add_view_checked(self, request: HttpRequest, form_url: str = "", extra_context=None):
        return super().add_view(request, form_url, extra_context)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        return (
            super()
            .get_queryset(request)
            # Personal files are not managed here, not even by their owner (moved into a
            # collection or their expiry cleared, they would outlive their purpose): their own
            # read-only page (PersonalFileAdmin) lists them for superusers.
            .filter(documents_readable_filter(user=request.user))
            .exclude(personal_files_filter())
            .select_related("uploaded_by", "collection")
            .annotate(chunk_total=Count("chunks"))
        )

    def formfield_for_foreignkey(self, db_field, request: HttpRequest, **kwargs):
        if db_field.name == "collection":
            kwargs["queryset"] = collections_readable(user=request.user).order_by("name")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_changeform_initial_data(self, request: HttpRequest) -> dict:
        return {
            "collection": collection_default().pk,
            **super().get_changeform_initial_data(request),
        }

    def get_form(self, request: HttpRequest, obj: Document | None = None, **kwargs):
        if obj is None:
            kwargs["form"] = self.add_form
        return super().get_form(request, obj, **kwargs)

    def get_fieldsets(self, request: HttpRequest, obj: Document | None = None):
        return self.add_fieldsets if obj is None else self.fieldsets

    def get_readonly_fields(self, request: HttpRequest, obj: Document | None = None):
        return () if obj is None else self.readonly_fields

    def view_on_site(self, obj: Document) -> str:
        return reverse("knowledge:document", args=[obj.pk])

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None):
        readable = Document.objects.filter(documents_readable_filter(user=request.user)).exclude(
            personal_files_filter()
        )
        active = documents_in_progress(readable).count()
        context = {
            "documents_in_progress": active,
            "refresh_seconds": REFRESH_SECONDS if active else None,
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=context)

    def save_model(self, request: HttpRequest, obj: Document, form, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        upload = form.cleaned_data["file"]
        name = Path(upload.name).name
        key = uuid.uuid4().hex
        obj.source = f"upload:{key}/{name}"
        obj.media_type = file_type_check(name)
        obj.status = Document.Status.PENDING
        obj.error = ""
        obj.uploaded_by = request.user
        obj.metadata = {"original_name": name, "size": upload.size}
        # A folder of its own keeps the stored file's name as uploaded (no renaming on a
        # clash), so a document without a title is named after the file the admin chose.
        obj.file.save(f"{key}/{name}", upload, save=False)
        obj.save()
        document_processing_enqueue(obj)

    def response_add(self, request: HttpRequest, obj: Document, post_url_continue=None):
        if "_popup" in request.POST or "_continue" in request.POST:
            return super().response_add(request, obj, post_url_continue)
        self.message_user(
            request,
            format_html(
                "“{}” was uploaded and is being processed in the background; its status "
                "below updates by itself.",
                self.display_title(obj),
            ),
            messages.SUCCESS,
        )
        if "_addanother" in request.POST:
            return HttpResponseRedirect(request.path)
        return HttpResponseRedirect(reverse("admin:knowledge_document_changelist"))

    def delete_model(self, request: HttpRequest, obj: Document) -> None:
        file_name = obj.file.name if obj.file else ""
        super().delete_model(request, obj)
        self._files_delete_on_commit([file_name])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        file_names = [name for name in queryset.values_list("file", flat=True) if name]
        super().delete_queryset(request, queryset)
        self._files_delete_on_commit(file_names)

    def _files_delete_on_commit(self, file_names: list[str]) -> None:
        storage = Document._meta.get_field("file").storage

        def delete() -> None:
            for name in file_names:
                if name and storage.exists(name):
                    storage.delete(name)

        transaction.on_commit(delete)

    # --- Columns -----------------------------------------------------------------------
    @admin.display(description="Title", ordering="title")
    def display_title(self, obj: Document) -> str:
        if obj.title:
            return obj.title
        if isinstance(obj.metadata, dict) and obj.metadata.get("original_name"):
            return obj.metadata["original_name"]
        return obj.source.rsplit("/", 1)[-1] or obj.source

    @admin.display(description="Status", ordering="status")
    def status_badge(self, obj: Document) -> str:
        colour, background = STATUS_COLOURS.get(obj.status, ("#374151", "#f3f4f6"))
        return format_html(
            '<span class="document-status document-status-{}" style="color:{};'
            "background:{};border-radius:999px;padding:2px 10px;font-weight:600;"
            'white-space:nowrap">{}{}{}</span>',
            obj.status,
            colour,
            background,
            obj.get_status_display(),
            " · re-processing" if obj.reprocessing_since is not None else "",
            f" · {obj.progress}" if obj.progress else "",
        )

    @admin.display(description="Expires", ordering="expires_at")
    def expiry(self, obj: Document) -> str:
        if obj.expires_at is None:
            return "—"
        day = timezone.localtime(obj.expires_at).strftime("%Y-%m-%d %H:%M")
        if obj.is_expired:
            return format_html(
                '<span class="document-expired" style="color:#b91c1c;font-weight:600">'
                "Expired {}</span>",
                day,
            )
        return day

    @admin.display(description="Chunks", ordering="chunk_total")
    def chunk_count(self, obj: Document) -> int:
        total = getattr(obj, "chunk_total", None)
        return obj.chunks.count() if total is None else total

    @admin.display(description="Error")
    def error_summary(self, obj: Document) -> str:
        if document_is_stalled(obj):
            return (
                "No progress for a long time: is the ingestion worker running (bin/serve)? "
                "Re-process the document to queue it again."
            )
        if not obj.error:
            return ""
        if obj.status == Document.Status.READY:  # the last good version is still searchable
            return Truncator(f"Re-processing failed (still searchable): {obj.error}").chars(120)
        return Truncator(obj.error).chars(120)

    @admin.display(description="OCR")
    def ocr(self, obj: Document) -> str:
        return ocr_summary(obj.metadata) or "—"

    @admin.display(description="Stored file")
    def stored_file(self, obj: Document) -> str:
        return obj.file.name if obj.file else "—"

    @admin.display(description="Chunks")
    def chunks_link(self, obj: Document) -> str:
        total = self.chunk_count(obj)
        if not total:
            return "No chunks."
        url = reverse("admin:knowledge_chunk_changelist") + f"?document__id__exact={obj.pk}"
        return format_html('<a href="{}">View the {} chunks</a>', url, total)

    # --- Actions (the logic is in knowledge.services) ----------------------------------
    @admin.action(description="Enable selected documents (may be cited)", permissions=["change"])
    def enable_documents(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        changed = documents_set_enabled(ids=_ids(queryset), enabled=True)
        self.message_user(request, f"{changed} document(s) enabled.", messages.SUCCESS)

    @admin.action(description="Disable selected documents (never cited)", permissions=["change"])
    def disable_documents(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        changed = documents_set_enabled(ids=_ids(queryset), enabled=False)
        self.message_user(request, f"{changed} document(s) disabled.", messages.SUCCESS)

    @admin.action(
        description="Re-process selected documents (parse, chunk and embed again)",
        permissions=["change"],
    )
    def reprocess_documents(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        queued, busy = documents_reprocess(ids=_ids(queryset))
        if queued:
            self.message_user(
                request, f"{queued} document(s) queued for processing.", messages.SUCCESS
            )
        if busy:
            self.message_user(
                request,
                f"{busy} document(s) skipped: already waiting or being processed.",
                messages.WARNING,
            )

    @admin.action(description="Move selected documents to a collection", permissions=["change"])
    def move_to_collection(self, request: HttpRequest, queryset: QuerySet[Document]):
        """An intermediate page to choose the collection; its form posts back here with
        `apply`, and the documents move."""
        form = MoveToCollectionForm(
            request.POST if "apply" in request.POST else None, user=request.user
        )
        if form.is_valid():
            collection = form.cleaned_data["collection"]
            moved = documents_move(ids=_ids(queryset), collection=collection)
            self.message_user(
                request,
                format_html("{} document(s) moved to “{}”.", moved, collection.name),
                messages.SUCCESS,
            )
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Move documents to a collection",
            "opts": self.model._meta,
            "form": form,
            "documents": queryset.order_by("title", "id"),
            "action_checkbox_name": admin.helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(
            request, "admin/knowledge/document/move_to_collection.html", context
        )


def _ids(queryset: QuerySet[Document]) -> list[int]:
    # The admin's queryset is annotated (GROUP BY): act on plain rows by primary key.
    return list(queryset.values_list("pk", flat=True))
