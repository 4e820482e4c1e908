"""Browser pages of the chat."""

from django.urls import path

from chat import views

app_name = "chat"
urlpatterns = [
    path("", views.home, name="home"),
    path("c/new/", views.conversation_new, name="conversation_new"),
    path("c/<uuid:conversation_id>/", views.conversation, name="conversation"),
    path(
        "c/<uuid:conversation_id>/delete/",
        views.conversation_delete_view,
        name="conversation_delete",
    ),
    path(
        "c/<uuid:conversation_id>/clear/",
        views.conversation_clear_view,
        name="conversation_clear",
    ),
    path("c/<uuid:conversation_id>/title/", views.conversation_title, name="conversation_title"),
    path(
        "c/<uuid:conversation_id>/rename/",
        views.conversation_rename_view,
        name="conversation_rename",
    ),
    path("history/", views.history, name="history"),
    path("settings/documents/", views.document_options, name="document_options"),
    path("messages/<uuid:message_id>/feedback/", views.message_feedback, name="message_feedback"),
]
