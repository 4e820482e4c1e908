"""WebSocket routes of the chat (the consumer arrives with the browser UI)."""

websocket_urlpatterns: list = []
