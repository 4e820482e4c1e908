"""ASGI entry point: HTTP through Django, WebSockets through Channels.

Server processes import this module, management commands and the ingestion worker do not, so
it sets the defaults that only a server wants (each can still be set in the environment; see
config/settings.py):

- DB_POOL=1: database connections come from a pool;
- EMBEDDING_BATCH_WINDOW_MS=2: questions asked at the same moment are embedded together
  (knowledge.embedding.QueryBatcher), by one thread;
- EMBEDDING_THREADS=1: the model embeds on one thread per call;
- EMBEDDING_WARM_UP=1: the embedding model is loaded in the background at startup, not by the
  first question.

Why each, with its figures: docs/decisions/0049-server-process-defaults.md.

At startup it also releases answers left `streaming` by a server that died (their heartbeat
older than chat.services.STALE_STREAMING), so their pages stop showing them as being typed.
"""

import os
import threading

from django.core.asgi import get_asgi_application

from config import daphne_uploads

daphne_uploads.install()

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
SERVER_DEFAULTS = {
    "DB_POOL": "1",
    "EMBEDDING_THREADS": "1",
    "EMBEDDING_WARM_UP": "1",
    "EMBEDDING_BATCH_WINDOW_MS": "2",
}
_added = [name for name in SERVER_DEFAULTS if name not in os.environ]
os.environ.update({name: SERVER_DEFAULTS[name] for name in _added})
django_asgi_app = get_asgi_application()  # reads the settings (unless already read)
for _name in _added:  # not passed on to processes this one starts
    del os.environ[_name]

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402
from django.db import connection  # noqa: E402

from chat.clients.mcp_asgi import with_mcp  # noqa: E402
from chat.services import answers_release_stale_at_startup  # noqa: E402
from config.routing import websocket_urlpatterns  # noqa: E402
from knowledge.warm_up import embedding_warm_up_start  # noqa: E402

application = ProtocolTypeRouter(
    {
        # Static assets are vendored and small: served by the app itself, no Node, no CDN.
        # /mcp/ is the MCP server's Streamable HTTP endpoint (chat.clients.mcp_asgi).
        "http": with_mcp(ASGIStaticFilesHandler(django_asgi_app)),
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)


def _release_stale_answers() -> None:
    # On a thread of its own: its connection is closed (back to the pool) when it is done,
    # and the ORM may run even when the application is imported from async code (tests).
    try:
        answers_release_stale_at_startup()
    finally:
        connection.close()


_startup = threading.Thread(target=_release_stale_answers, name="release-stale-answers")
_startup.start()
_startup.join()
embedding_warm_up_start()
