"""A database that cannot be reached (stopped, restarting, out of connections) answers 503
within a few seconds instead of a 500 or a hang: the API's error envelope
(`upstream-unavailable`, with Retry-After), a friendly page in the browser. The server keeps
running and serves again as soon as the database is back; pooled connections broken by the
outage are dropped then, not lent to the next requests."""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.utils.deprecation import MiddlewareMixin

from chat.api.errors import error_response, is_api_request

logger = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5
UNAVAILABLE_MESSAGE = "Sourced cannot reach its database right now. Please try again in a moment."


def is_database_unavailable(exc: BaseException) -> bool:
    """Django's wrappers of the driver's connection errors (a pool that cannot lend a
    connection in time raises one of these too)."""
    return isinstance(exc, (OperationalError, InterfaceError))


def unavailable_response(request: HttpRequest) -> HttpResponse:
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if is_api_request(request):
        return error_response(
            "upstream-unavailable", UNAVAILABLE_MESSAGE, status=503, headers=headers
        )
    # Rendered without the request: its context processors would ask the database again.
    html = render_to_string("unavailable.html", {"message": UNAVAILABLE_MESSAGE})
    return HttpResponse(html, status=503, headers=headers)


def _drop_broken_pooled_connections() -> None:
    pool = getattr(connection, "pool", None)
    if pool is None:
        return
    try:
        pool.check()  # discards the idle connections the outage broke
    except Exception:  # best effort: the pool also finds them when they are lent
        logger.debug("Checking the connection pool failed", exc_info=True)


class DatabaseUnavailableMiddleware(MiddlewareMixin):
    """Turns a database connection error raised by a view into a 503 (sync and async views;
    errors raised outside a view reach `config.errors.handler500`, which does the same)."""

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not is_database_unavailable(exception):
            return None
        logger.warning(
            "Database unavailable for %s %s: %s", request.method, request.path, exception
        )
        _drop_broken_pooled_connections()
        return unavailable_response(request)


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    """Sends settings.CONTENT_SECURITY_POLICY with every response that has no policy of its own
    (Django 5.2 has no CSP support; Django 6 will). A header, unlike a <meta>, also covers the
    admin, the API docs, error pages and `frame-ancestors`."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        policy = settings.CONTENT_SECURITY_POLICY
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response
