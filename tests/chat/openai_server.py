"""A real HTTP server on loopback speaking the OpenAI chat-completions protocol, for tests.

It streams scripted replies as SSE `chat.completion.chunk` frames (`data: {...}` lines, then
`data: [DONE]`), answers `GET /v1/models`, and records every request it received (path, JSON
body) and how each reply ended (sent whole, or the client went away). Replies are taken from
the script in order; with the script empty it answers `default`.

    with openai_server() as server:
        server.script(Scripted(pieces=["Leave is 25 days", " [1]."]), Scripted(status=500))
        ... LLM_BASE_URL=server.base_url ...
        server.requests[0].body["messages"]
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Scripted:
    """One reply: an HTTP error `status`, or `pieces` streamed with `delay` seconds between
    them; `drop_after`: close the connection abruptly after that many pieces."""

    pieces: tuple[str, ...] | list[str] = ()
    status: int = 200
    delay: float = 0.0
    drop_after: int | None = None


@dataclass
class Received:
    path: str
    body: dict[str, Any]
    finished: bool = False  # the whole reply was sent
    client_gone: bool = False  # writing failed: the client closed the connection

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body.get("messages", [])


@dataclass
class OpenAIServer:
    base_url: str = ""
    requests: list[Received] = field(default_factory=list)
    default: Scripted = field(default_factory=lambda: Scripted(pieces=["No script."]))
    _script: list[Scripted] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *replies: Scripted) -> None:
        with self._lock:
            self._script.extend(replies)

    def next_reply(self) -> Scripted:
        with self._lock:
            return self._script.pop(0) if self._script else self.default

    def completions(self) -> list[Received]:
        return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def wait_for(self, predicate, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.02)
        return False


def _chunk(text: str | None, *, finish: str | None = None) -> bytes:
    frame = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "test-model",
        "choices": [
            {
                "index": 0,
                "delta": {"content": text} if text is not None else {},
                "finish_reason": finish,
            }
        ],
    }
    return f"data: {json.dumps(frame)}\n\n".encode()


def _handler(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the body ends when the connection closes

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            received = Received(self.path, {})
            server.requests.append(received)
            if self.path.endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": "test-model"}]})
            else:
                self._json(404, {"error": {"message": "not found"}})
            received.finished = True

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            received = Received(self.path, body)
            server.requests.append(received)
            reply = server.next_reply()
            if reply.status != 200:
                self._json(
                    reply.status,
                    {"error": {"message": f"scripted {reply.status}", "type": "server_error"}},
                    headers={"retry-after-ms": "10"},
                )
                received.finished = True
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            try:
                for index, piece in enumerate(reply.pieces):
                    if reply.drop_after is not None and index >= reply.drop_after:
                        self.connection.shutdown(2)  # abrupt: no [DONE], no finish_reason
                        return
                    if index and reply.delay:
                        time.sleep(reply.delay)
                    self.wfile.write(_chunk(piece))
                    self.wfile.flush()
                self.wfile.write(_chunk(None, finish="stop"))
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()
                received.finished = True
            except (BrokenPipeError, ConnectionResetError, OSError):
                received.client_gone = True

        def _json(self, status: int, payload: dict, headers: dict[str, str] | None = None):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

    return Handler


@contextmanager
def openai_server() -> Iterator[OpenAIServer]:
    """Serve on a free port of 127.0.0.1 until the block ends."""
    state = OpenAIServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, name="openai-test-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
