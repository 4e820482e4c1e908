"""The JSON/SSE API."""

urlpatterns: list = []
