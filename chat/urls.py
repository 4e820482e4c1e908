"""Browser pages of the chat."""

app_name = "chat"
urlpatterns: list = []
