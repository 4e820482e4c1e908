"""OpenAPI additions: the async streaming view is not a DRF view, so its documented twin
(`ChatApiSchema`) is added to the endpoints drf-spectacular enumerates."""

from __future__ import annotations

from chat.api.views import ChatApiSchema

CHAT_PATH = "/api/chat"


def add_chat_endpoint(endpoints: list, **kwargs) -> list:
    """PREPROCESSING_HOOKS entry: document POST /api/chat."""
    if any(path == CHAT_PATH for path, *_ in endpoints):
        return endpoints
    return [*endpoints, (CHAT_PATH, r"^api/chat$", "POST", ChatApiSchema.as_view())]
