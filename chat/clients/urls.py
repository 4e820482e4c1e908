"""The OpenAI-compatible API, mounted at /v1/ (the MCP server is an ASGI app of its own at
/mcp/: chat.clients.mcp_asgi)."""

from django.urls import path

from chat.clients import openai_api

app_name = "v1"
urlpatterns = [
    path("models", openai_api.models_list, name="models"),
    path("models/<str:model_id>", openai_api.model_detail, name="model"),
    path("chat/completions", openai_api.chat_completions, name="chat-completions"),
]
