"""Document pages."""

app_name = "knowledge"
urlpatterns: list = []
