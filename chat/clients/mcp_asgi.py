"""The MCP server's Streamable HTTP transport as an ASGI app at /mcp/, in front of the Django
app (`with_mcp`, wired in config/asgi.py).

Every request must carry `Authorization: Bearer <API token>` of a staff user: otherwise 401
(403 for a user who is not staff), `{"error": {"code", "message"}}`, before the SDK sees it;
the user goes into the ASGI scope for the tools (chat.clients.mcp_server). The SDK's session
manager runs stateless (each POST is complete in itself: nothing to keep between requests or
across server processes) and answers JSON. Its task group must be running before a request is
handled: daphne speaks no ASGI lifespan, so the first request starts it (`session_manager.run()`
in a task that lasts until daphne shuts down, which cancels it). The SDK's DNS-rebinding check
is off: it protects servers that take requests without credentials, and every request here must
carry a token. A database outage while checking the token is a 503.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
from typing import TYPE_CHECKING, Any

from channels.db import database_sync_to_async
from django.db import InterfaceError, OperationalError

from chat.clients.answers import staff_token_user
from chat.clients.openai_format import UNAVAILABLE_MESSAGE
from chat.errors import AnswerError

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

PATH = "/mcp"
# The MCP SDK and the server built on it (chat.clients.mcp_server) are imported when the first
# MCP request arrives, in a thread, not when the web process starts, which every process start
# (and every test server) would otherwise pay for (docs/decisions/0170-the-suite-in-parallel-
# workers.md, second round).
SERVER_MODULE = "chat.clients.mcp_server"

Scope = dict[str, Any]


class McpApp:
    """The authenticated Streamable HTTP endpoint (one per process)."""

    def __init__(self) -> None:
        self._manager: StreamableHTTPSessionManager | None = None
        self._running: asyncio.Task | None = None
        self._starting = asyncio.Lock()

    async def _manager_running(self) -> StreamableHTTPSessionManager:
        async with self._starting:  # one request starts it; the others wait, or try again
            if self._manager is None:
                module = await asyncio.to_thread(importlib.import_module, SERVER_MODULE)
                from mcp.server.transport_security import TransportSecuritySettings

                mcp_server = module.mcp_server
                mcp_server.streamable_http_app(
                    stateless_http=True,
                    json_response=True,
                    transport_security=TransportSecuritySettings(
                        enable_dns_rebinding_protection=False
                    ),
                )
                ready = asyncio.Event()
                self._running = asyncio.ensure_future(self._run(mcp_server.session_manager, ready))
                await ready.wait()
                self._manager = mcp_server.session_manager
                _on_server_shutdown(self._stop)
        return self._manager

    async def _stop(self) -> None:
        """End the session manager's task group. The SDK reads a resource through AnyIO's
        worker threads, which leave only when the task at the top of their task tree (this
        one) is done: without this, a process that has served a resource never exits on
        SIGTERM, its last thread waiting for work that will not come."""
        if self._running is not None:
            self._running.cancel()
            await asyncio.gather(self._running, return_exceptions=True)

    @staticmethod
    async def _run(manager: StreamableHTTPSessionManager, ready: asyncio.Event) -> None:
        async with manager.run():
            ready.set()
            await asyncio.Event().wait()  # until the process ends

    async def __call__(self, scope: Scope, receive, send) -> None:
        headers = dict(scope.get("headers") or [])
        authorization = headers.get(b"authorization", b"").decode("latin-1")
        try:
            user = await database_sync_to_async(staff_token_user)(authorization)
        except AnswerError as error:
            await _error(send, error)
            return
        except (OperationalError, InterfaceError):  # the database is away: try again soon
            await _error(send, AnswerError("upstream-unavailable", UNAVAILABLE_MESSAGE))
            return
        manager = await self._manager_running()
        user_key = importlib.import_module(SERVER_MODULE).USER_KEY
        await manager.handle_request({**scope, user_key: user}, receive, send)


def _on_server_shutdown(stop) -> None:
    """Run the coroutine function `stop` as daphne shuts down (a Twisted "before shutdown"
    trigger, which waits for it), while its event loop still runs. Outside daphne (tests
    calling the app directly) there is no reactor to hook."""
    if "twisted.internet.reactor" not in sys.modules:
        return
    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    reactor.addSystemEventTrigger(
        "before", "shutdown", lambda: Deferred.fromFuture(asyncio.ensure_future(stop()))
    )


async def _error(send, error: AnswerError) -> None:
    body = json.dumps({"error": {"code": error.code, "message": error.message}}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if error.status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="mcp"'))
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


mcp_app = McpApp()


def with_mcp(http_app):
    """`http_app` with /mcp (and /mcp/...) served by the MCP endpoint."""

    async def route(scope: Scope, receive, send) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == PATH or path.startswith(PATH + "/")):
            await mcp_app(scope, receive, send)
        else:
            await http_app(scope, receive, send)

    return route
