"""What every browser page of the site shares, whichever app renders it: staff-only access
with a clear "no access" page, the sidebar of conversations, and the check that a link is a
safe external one. It imports neither app (but for the read rule's one staff check,
`knowledge.access.user_is_staff`), so that the chat and the document pages can both
use it without depending on each other: the sidebar's conversations come from the reader the
chat registers when it starts (`sidebar_reader_register`, called by `chat.apps.ChatConfig`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from knowledge.access import user_is_staff

SIDEBAR_LIMIT = 30

# (user, limit) → (shared, private) conversations, each newest first, at most `limit` of each.
SidebarReader = Callable[[AbstractBaseUser, int], tuple[Sequence[Any], Sequence[Any]]]
_sidebar_reader: SidebarReader | None = None


def sidebar_reader_register(reader: SidebarReader) -> None:
    """Name the function that reads the sidebar's conversations (the chat app's, at start-up)."""
    global _sidebar_reader
    _sidebar_reader = reader


def no_access(request: HttpRequest, *, reason: str = "", status: int = 403) -> HttpResponse:
    """The "no access" page: why, and a way out."""
    return render(
        request,
        "no_access.html",
        {
            "heading": "Not found" if status == 404 else "No access",
            "reason": reason,
            "show_home": user_is_staff(getattr(request, "user", None)),
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
        if not user_is_staff(user):
            return no_access(request)
        return view(request, *args, **kwargs)

    return wrapper


def safe_external_url(url: str | None) -> str:
    """The URL when it is an absolute http(s) link, else "" (no javascript:, data:, …)."""
    if not url:
        return ""
    url = url.strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    if parts.scheme.lower() not in {"http", "https"} or not parts.netloc:
        return ""
    return url


def sidebar_context(user: AbstractBaseUser, *, active_id: str = "") -> dict:
    """The sidebar's conversation groups: shared with all staff, and the user's private ones,
    as the registered reader gives them (RuntimeError when none was registered)."""
    if _sidebar_reader is None:
        raise RuntimeError("No sidebar reader: the chat app registers one when it starts.")
    shared, private = _sidebar_reader(user, SIDEBAR_LIMIT + 1)
    return {
        "sidebar": {
            "groups": [
                {
                    "key": "shared",
                    "label": "Shared",
                    "icon": "icon-[lucide--users]",
                    "conversations": shared[:SIDEBAR_LIMIT],
                    "empty": "No shared conversations yet.",
                },
                {
                    "key": "private",
                    "label": "Private",
                    "icon": "icon-[lucide--lock]",
                    "conversations": private[:SIDEBAR_LIMIT],
                    "empty": "Tick “Private” before a first question to keep a chat to yourself.",
                },
            ],
            "more": len(shared) > SIDEBAR_LIMIT or len(private) > SIDEBAR_LIMIT,
        },
        "active_id": active_id,
    }
