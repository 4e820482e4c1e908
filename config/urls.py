"""URL wiring only: each app owns its own URLs."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    # Before the admin's own URLs, which would take "insights/" for an app's name.
    path("admin/insights/", include("chat.insights.urls")),
    path("admin/", admin.site.urls),
    # Sign-in: login/, logout/, oidc/login/, oidc/callback/, account/tokens/.
    path("", include("accounts.urls")),
    path("api/", include("chat.api.urls")),
    path("v1/", include("chat.clients.urls")),  # the OpenAI-compatible API
    path("documents/", include("knowledge.urls")),
    path("", include("chat.urls")),
]

# Under /api/ errors are the JSON error envelope; elsewhere Django's pages.
handler400 = "config.errors.handler400"
handler403 = "config.errors.handler403"
handler404 = "config.errors.handler404"
handler500 = "config.errors.handler500"

if settings.DEBUG:
    from django.contrib.staticfiles.urls import staticfiles_urlpatterns

    urlpatterns += staticfiles_urlpatterns()
