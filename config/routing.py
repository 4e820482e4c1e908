"""WebSocket routes."""

from chat.routing import websocket_urlpatterns

__all__ = ["websocket_urlpatterns"]
