"""The authentication backend that throttles password logins (django-axes)."""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend


class ThrottledLoginBackend(AxesStandaloneBackend):
    """Axes' backend: refuses a login whose username or address is locked out. A call without
    a request (the test client's `login()`, code that calls `authenticate()` itself) has no
    address to count and is let through to the next backend instead of raising."""

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)
