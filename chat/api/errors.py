"""The API's error envelope (filled in by the chat core)."""

from rest_framework.views import exception_handler as api_exception_handler

__all__ = ["api_exception_handler"]
