"""The insights page and its CSV export, under the admin (`/admin/insights/`): thin adapters
over `chat.insights.page` and `chat.insights.export`. Both need an active staff login (the
admin's) and `insights_allowed`: others get the admin's login page or a 403."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone

from chat.insights.export import export_csv_async
from chat.insights.page import insights_allowed, insights_page
from chat.insights.period import PERIOD_DAYS, PeriodError, period_parse


def _allowed_or_403(request: HttpRequest) -> None:
    if not insights_allowed(request.user):
        raise PermissionDenied


def insights_view(request: HttpRequest) -> HttpResponse:
    """The page for the period the query string asks for (`days`, or `from` and `to`; `by`);
    a period it cannot show is answered 400 with the reason, above the default period."""
    _allowed_or_403(request)
    today = timezone.localdate()
    error = ""
    try:
        period = period_parse(request.GET, today=today)
    except PeriodError as exc:
        error = str(exc)
        period = period_parse({}, today=today)
    context = {
        **admin.site.each_context(request),
        "title": "Insights",
        "subtitle": None,
        "page": insights_page(period=period, user=request.user),
        "error": error,
        "period_days": PERIOD_DAYS,
        "chosen_days": None if error or request.GET.get("from") else period.days,
    }
    return TemplateResponse(
        request, "admin/insights/index.html", context, status=400 if error else 200
    )


def insights_export_view(request: HttpRequest) -> HttpResponse:
    """`export.csv?from=YYYY-MM-DD&to=YYYY-MM-DD` (or `days`): the period's exchanges as a
    CSV download, streamed; 400 with the reason in plain text for a period it cannot export."""
    _allowed_or_403(request)
    try:
        period = period_parse(request.GET, today=timezone.localdate())
    except PeriodError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain; charset=utf-8")
    filename = f"sourced-exchanges-{period.first.isoformat()}-{period.last.isoformat()}.csv"
    response = StreamingHttpResponse(
        export_csv_async(period=period), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response
