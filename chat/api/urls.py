"""The JSON/SSE API under /api/, its OpenAPI schema and docs page (assets served locally)."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from chat.api import files, views

app_name = "api"
urlpatterns = [
    path("chat", views.chat_api, name="chat"),
    path("conversations", views.ConversationListApi.as_view(), name="conversations"),
    path(
        "conversations/<str:conversation_id>",
        views.ConversationDetailApi.as_view(),
        name="conversation",
    ),
    path(
        "conversations/<str:conversation_id>/messages",
        views.ConversationMessagesApi.as_view(),
        name="conversation-messages",
    ),
    path(
        "messages/<str:message_id>/feedback",
        views.MessageFeedbackApi.as_view(),
        name="message-feedback",
    ),
    path("documents", views.DocumentListApi.as_view(), name="documents"),
    path("search", views.SearchApi.as_view(), name="search"),
    path("files", files.FileUploadApi.as_view(), name="files"),
    path("files/<str:file_id>", files.FileDetailApi.as_view(), name="file"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The split view serves the page's start-up script as a file: no inline script (CSP).
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="api:schema"), name="docs"),
]
