"""Document pages."""

from django.urls import path

from knowledge import views

app_name = "knowledge"
urlpatterns = [
    path("<int:pk>/", views.document_detail, name="document"),
    path("<int:pk>/file/", views.document_file, name="document_file"),
]
