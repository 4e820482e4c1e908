"""Sign-in's URLs (mounted at the site's root by config/urls.py)."""

from django.urls import path

from accounts import views

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", views.logout_view, name="logout"),
    path("oidc/login/", views.oidc_login, name="oidc_login"),
    path("oidc/callback/", views.oidc_callback, name="oidc_callback"),
    path("account/tokens/", views.api_tokens, name="api_tokens"),
    path("account/preferences/", views.preferences, name="preferences"),
]
