"""The admin's Sources: folders, web sites and WebDAV shares the ingestion worker re-syncs on
their interval, each with its last run (its log of bounds reached) and recent history.
Superusers only: a source makes the server read a folder of its machine, or request a host,
into a collection (imported by knowledge/admin/__init__.py)."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from knowledge.collections import collection_default
from knowledge.models import Collection, Source, SyncRun
from knowledge.services.sync import folder_path_clean
from knowledge.sources.locations import (
    LocationError,
    credentials_env_clean,
    location_clean,
    source_kind,
)
from knowledge.sources.services import sources_rescan_now

_EDITABLE = ("location", "collection", "credentials_env", "interval_minutes", "enabled")


class SourceForm(forms.ModelForm):
    """A source: its location (a folder path, an http(s):// start URL or a webdav(s):// share;
    checked, stored in one spelling, its kind taken from it), the collection new documents go
    to (the default one when none is chosen), the variable holding its credentials, its
    interval, whether it is re-scanned."""

    class Meta:
        model = Source
        fields = _EDITABLE

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if "collection" in self.fields:
            self.fields["collection"].required = False

    def clean_collection(self) -> Collection:
        return self.cleaned_data.get("collection") or collection_default()

    def clean_location(self) -> str:
        location = self.cleaned_data["location"]
        try:
            kind = source_kind(location)
            if kind == Source.Kind.FOLDER:
                root = folder_path_clean(location, exclude_pk=self.instance.pk)
            else:
                kind, root = location_clean(location, exclude_pk=self.instance.pk)
        except ValueError as exc:  # LocationError is one
            raise forms.ValidationError(str(exc), code="invalid_location") from exc
        self.instance.kind = kind
        return root

    def clean(self) -> dict:
        cleaned = super().clean()
        kind = self.instance.kind if "location" not in self.errors else None
        if kind is not None and "credentials_env" in cleaned:
            try:
                cleaned["credentials_env"] = credentials_env_clean(
                    cleaned["credentials_env"], kind=kind
                )
            except LocationError as exc:
                self.add_error("credentials_env", str(exc))
        return cleaned


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    """Sources the ingestion worker mirrors into the knowledge base on their interval
    (knowledge/sources/services.py). Superusers only."""

    form = SourceForm
    list_display = (
        "location",
        "kind",
        "collection",
        "interval_minutes",
        "enabled",
        "last_run",
        "next_run_at",
    )
    list_filter = ("kind", "enabled", "collection")
    search_fields = ("location",)
    actions = ("rescan_now",)
    readonly_fields = ("kind", "next_run_at", "last_run_details", "recent_runs")

    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request: HttpRequest, obj=None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return self.has_module_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return self.has_module_permission(request)

    def get_readonly_fields(self, request: HttpRequest, obj: Source | None = None):
        # A source's location identifies its documents (Document.sync_root): fixed once created.
        return self.readonly_fields if obj is None else ("location", *self.readonly_fields)

    def get_fields(self, request: HttpRequest, obj: Source | None = None):
        if obj is None:
            return _EDITABLE
        return ("kind", *_EDITABLE, "next_run_at", "last_run_details", "recent_runs")

    def get_changeform_initial_data(self, request: HttpRequest) -> dict:
        return {
            "collection": collection_default().pk,
            **super().get_changeform_initial_data(request),
        }

    @admin.display(description="Last run")
    def last_run(self, obj: Source) -> str:
        run = obj.runs.order_by("-started_at", "-pk").first()
        if run is None:
            return "Not yet"
        return format_html(
            '<span class="sync-run sync-run-{}">{} · {}</span>',
            run.status,
            timezone.localtime(run.started_at).strftime("%Y-%m-%d %H:%M"),
            _run_summary(run),
        )

    @admin.display(description="Last run")
    def last_run_details(self, obj: Source) -> str:
        run = obj.runs.order_by("-started_at", "-pk").first()
        if run is None:
            return "Not run yet: the ingestion worker re-scans it within a minute or so."
        errors = format_html_join(
            "", "<li><code>{}</code>: {}</li>", ((path, error) for path, error in run.errors)
        )
        log = format_html_join("", "<li>{}</li>", ((line,) for line in run.log or []))
        return format_html(
            '<div class="sync-run sync-run-{}"><p>{} ({}, {}): {}</p>{}{}{}</div>',
            run.status,
            timezone.localtime(run.started_at).strftime("%Y-%m-%d %H:%M:%S"),
            run.get_status_display(),
            _run_duration(run),
            _run_summary(run),
            format_html("<p>{}</p>", run.message) if run.message else "",
            format_html('<p>Errors:</p><ul class="sync-errors">{}</ul>', errors) if errors else "",
            format_html('<p>Log:</p><ul class="sync-log">{}</ul>', log) if log else "",
        )

    @admin.display(description="Recent runs")
    def recent_runs(self, obj: Source) -> str:
        runs = obj.runs.order_by("-started_at", "-pk")[:10]
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    timezone.localtime(run.started_at).strftime("%Y-%m-%d %H:%M:%S"),
                    run.get_status_display(),
                    run.trigger,
                    _run_summary(run),
                )
                for run in runs
            ),
        )
        return format_html("<table>{}</table>", rows) if rows else "None yet."

    @admin.action(description="Re-scan the selected sources now")
    def rescan_now(self, request: HttpRequest, queryset: QuerySet[Source]) -> None:
        count = sources_rescan_now(ids=list(queryset.values_list("pk", flat=True)))
        self.message_user(
            request,
            f"{count} source(s) will be re-scanned by the ingestion worker shortly.",
            messages.SUCCESS,
        )


def _run_summary(run: SyncRun) -> str:
    if run.status == SyncRun.Status.RUNNING:
        return "running"
    if run.status == SyncRun.Status.FAILED and run.message:
        return Truncator(f"failed: {run.message}").chars(160)
    return (
        f"{run.added} added, {run.updated} updated, {run.moved} moved, {run.removed} removed, "
        f"{run.failed} failed, {run.unchanged} unchanged, {run.skipped} skipped"
    )


def _run_duration(run: SyncRun) -> str:
    if run.finished_at is None:
        return "not finished"
    return f"{(run.finished_at - run.started_at).total_seconds():.1f} s"
