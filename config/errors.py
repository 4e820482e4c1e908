"""The site's error handlers (`handler400` … `handler500` in config/urls.py): the API's error
envelope (`chat.api.errors`) under /api/, Django's pages elsewhere, and a 503 for a database
that cannot be reached (`config.middleware`), wherever the error was raised."""

from __future__ import annotations

import sys

from django.http import HttpRequest, HttpResponse
from django.views import defaults

from chat.api.errors import error_response, is_api_request
from config.middleware import is_database_unavailable, unavailable_response


def handler400(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_request(request):
        return error_response("bad-request", "Bad request.", status=400)
    return defaults.bad_request(request, exception)


def handler403(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_request(request):
        return error_response("forbidden", "You do not have permission to do this.", status=403)
    return defaults.permission_denied(request, exception)


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if is_api_request(request):
        return error_response(
            "not-found", f"There is no API endpoint at {request.path}.", status=404
        )
    return defaults.page_not_found(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    exc = sys.exc_info()[1]  # called while Django handles the exception
    if exc is not None and is_database_unavailable(exc):
        return unavailable_response(request)
    if is_api_request(request):
        return error_response(
            "internal", "Something went wrong on our side. Please try again.", status=500
        )
    return defaults.server_error(request)
