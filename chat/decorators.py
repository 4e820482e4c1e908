"""Access to the browser pages: staff only, a clear page for everyone else."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def no_access(request: HttpRequest, *, reason: str = "", status: int = 403) -> HttpResponse:
    """The "no access" page: why, and a way out."""
    return render(
        request,
        "no_access.html",
        {
            "heading": "Not found" if status == 404 else "No access",
            "reason": reason,
            "show_home": bool(getattr(request.user, "is_staff", False)),
        },
        status=status,
    )


def staff_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Anonymous visitors go to the login page; signed-in non-staff get the no-access page."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        user = request.user
        if not user.is_authenticated:
            if getattr(request, "htmx", False):  # a fragment request: send the page to login
                response = HttpResponse(status=204)
                response["HX-Redirect"] = redirect_to_login(request.get_full_path())["Location"]
                return response
            return redirect_to_login(request.get_full_path())
        if not (user.is_active and user.is_staff):
            return no_access(request)
        return view(request, *args, **kwargs)

    return wrapper
