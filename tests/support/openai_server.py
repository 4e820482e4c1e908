"""A real HTTP server on loopback speaking the OpenAI chat-completions protocol, for tests.

It streams scripted replies as SSE `chat.completion.chunk` frames (`data: {...}` lines, then
`data: [DONE]`), answers `GET /v1/models`, and records every request it received (path, JSON
body) and how each reply ended (sent whole, or the client went away). Replies are taken from
the script in order; with the script empty it answers `default`.

    with openai_server() as server:
        server.script(Scripted(pieces=["Leave is 25 days", " [1]."]), Scripted(status=500))
        ... LLM_BASE_URL=server.base_url ...
        server.requests[0].body["messages"]

`default` may also be a function of the request: `quoting_reply` answers like a perfectly
obedient model (the first sentence of source [1], cited), which is what
`python -m tests.support.openai_server` serves for running `manage.py evaluate --mode generative`
against it.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.live_server import server_thread_start


@dataclass(frozen=True)
class Scripted:
    """One reply: an HTTP error `status`, or `pieces` streamed with `delay` seconds between
    them; `drop_after`: close the connection abruptly after that many pieces; `wait`: seconds
    before the reply starts (a model still reading the prompt)."""

    pieces: tuple[str, ...] | list[str] = ()
    status: int = 200
    delay: float = 0.0
    drop_after: int | None = None
    wait: float = 0.0


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
    default: Scripted | Callable[[Received], Scripted] = field(
        default_factory=lambda: Scripted(pieces=["No script."])
    )
    _script: list[Scripted] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, *replies: Scripted) -> None:
        with self._lock:
            self._script.extend(replies)

    def next_reply(self, received: Received) -> Scripted:
        with self._lock:
            if self._script:
                return self._script.pop(0)
        return self.default(received) if callable(self.default) else self.default

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
            reply = server.next_reply(received)
            if reply.wait:
                time.sleep(reply.wait)
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


_FIRST_SOURCE = re.compile(r"<sources>\s*\[1\][^\n]*\n(.+?)(?:\n\n\[\d+\] |\n</sources>)", re.S)
_LAST_QUESTION = re.compile(r"User \(last question\): (.+)")


def quoting_reply(received: Received) -> Scripted:
    """An obedient model: an answer quotes the first sentence of source [1] and cites it; a
    follow-up rewrite repeats the question; anything else gets a one-line summary."""
    content = received.messages[-1]["content"] if received.messages else ""
    source = _FIRST_SOURCE.search(content)
    if source:
        sentence = re.split(r"(?<=[.!?])\s+", source.group(1).strip(), maxsplit=1)[0]
        words = sentence.split(" ")
        return Scripted(pieces=[words[0], *[f" {w}" for w in words[1:]], " [1]"])
    question = _LAST_QUESTION.search(content)
    if question:
        return Scripted(pieces=[question.group(1)])
    return Scripted(pieces=["The user asked about the documents."])


@contextmanager
def openai_server(port: int = 0) -> Iterator[OpenAIServer]:
    """Serve on 127.0.0.1 (a free port by default) until the block ends."""
    state = OpenAIServer()
    httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(state))
    httpd.daemon_threads = True
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = server_thread_start(httpd, name="openai-test-server")
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="An obedient OpenAI-protocol server on loopback.")
    parser.add_argument("--port", type=int, default=8765)
    port = parser.parse_args().port
    with openai_server(port) as server:
        server.default = quoting_reply
        print(f"LLM_BASE_URL={server.base_url} LLM_MODEL=test-model (Ctrl-C stops)", flush=True)
        with suppress(KeyboardInterrupt):
            threading.Event().wait()
