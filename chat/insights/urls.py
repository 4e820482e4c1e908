"""The insights' URLs, mounted at /admin/insights/ (config/urls.py), each behind the admin's
login (`admin.site.admin_view`: active staff)."""

from django.contrib import admin
from django.urls import path

from chat.insights import views

app_name = "insights"

urlpatterns = [
    path("", admin.site.admin_view(views.insights_view), name="index"),
    path("export.csv", admin.site.admin_view(views.insights_export_view), name="export"),
]
