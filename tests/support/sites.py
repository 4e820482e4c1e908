"""Real servers on loopback for the site and WebDAV syncs.

`site_serving`: a small web site served by Python's http.server (a thread, a free port), its
pages a dict the test edits between syncs, every request recorded. ETags are the sha256 of a
page's body and honoured (`If-None-Match` → 304). A page can be slow, drip its body, hang,
redirect, or answer any status. `share_serving`: WsgiDAV (a real WebDAV server) over a
folder, served by cheroot in a thread, with basic auth, every request recorded.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.live_server import free_port, server_thread_start


@dataclass
class Page:
    body: bytes | str = b""
    status: int = 200
    content_type: str = "text/html; charset=utf-8"
    location: str = ""  # a redirect's target
    etag: bool = True
    delay: float = 0.0  # seconds before the headers
    drip: float = 0.0  # seconds between two bytes of the body
    length: bool = True  # send Content-Length

    @property
    def data(self) -> bytes:
        return self.body.encode("utf-8") if isinstance(self.body, str) else self.body


@dataclass
class Site:
    host: str
    port: int
    pages: dict[str, Page] = field(default_factory=dict)  # path (with query) → page
    # Pages made on request: a path prefix → a function of the whole path.
    generated: dict[str, Callable[[str], Page]] = field(default_factory=dict)
    requests: list[tuple[str, str, dict]] = field(default_factory=list)  # method, path, headers
    required_headers: dict[str, str] = field(default_factory=dict)  # else 401

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return self.origin + path

    def requested(self, prefix: str = "") -> list[str]:
        return [path for _, path, _ in self.requests if path.startswith(prefix)]

    def page_for(self, path: str) -> Page | None:
        if path in self.pages:
            return self.pages[path]
        for prefix, make in self.generated.items():
            if path.startswith(prefix):
                return make(path)
        return None


def _handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            site.requests.append(("GET", self.path, dict(self.headers)))
            for name, value in site.required_headers.items():
                if self.headers.get(name) != value:
                    self._answer(Page("no", status=401, content_type="text/plain"))
                    return
            page = site.page_for(self.path)
            self._answer(page or Page("<h1>Not found</h1>", status=404))

        def _answer(self, page: Page) -> None:
            if page.delay:
                time.sleep(page.delay)
            data = page.data
            etag = f'"{hashlib.sha256(data).hexdigest()[:16]}"'
            if page.etag and page.status == 200 and self.headers.get("If-None-Match") == etag:
                self.send_response(304)
                self.send_header("ETag", etag)
                self.end_headers()
                return
            self.send_response(page.status)
            self.send_header("Content-Type", page.content_type)
            if page.location:
                self.send_header("Location", page.location)
            if page.etag and page.status == 200:
                self.send_header("ETag", etag)
            if page.length:
                self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            try:
                if page.drip:
                    for offset in range(len(data)):
                        self.wfile.write(data[offset : offset + 1])
                        self.wfile.flush()
                        time.sleep(page.drip)
                else:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up, as it should

        def log_message(self, format: str, *args) -> None:  # noqa: A002
            pass

    return Handler


@contextmanager
def site_serving(host: str = "127.0.0.1") -> Iterator[Site]:
    """A site on `host` (any address of 127.0.0.0/8) and a free port, until the block ends."""
    site = Site(host=host, port=free_port())
    server = ThreadingHTTPServer((host, site.port), _handler(site))
    server.daemon_threads = True
    server_thread_start(server)
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class Share:
    port: int
    folder: Path
    requests: list[tuple[str, str]] = field(default_factory=list)  # method, path

    def location(self, path: str = "/docs/", scheme: str = "webdav") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def count(self, method: str) -> int:
        return sum(1 for m, _ in self.requests if m == method)


@contextmanager
def share_serving(folder: Path, *, user: str, password: str) -> Iterator[Share]:
    """WsgiDAV serving `folder` as /docs/ on a free port of 127.0.0.1, readable with basic
    auth as `user`:`password`, until the block ends."""
    from cheroot import wsgi
    from wsgidav.wsgidav_app import WsgiDAVApp

    share = Share(port=free_port(), folder=folder)
    app = WsgiDAVApp(
        {
            "provider_mapping": {"/docs": str(folder)},
            "http_authenticator": {
                "domain_controller": None,  # SimpleDomainController
                "accept_basic": True,
                "accept_digest": False,
                "default_to_digest": False,
            },
            "simple_dc": {"user_mapping": {"*": {user: {"password": password}}}},
            "verbose": 0,
            "logging": {"enable": False, "enable_loggers": []},
            "dir_browser": {"enable": False},
            "lock_storage": True,
        }
    )

    def recording(environ, start_response):
        share.requests.append((environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")))
        return app(environ, start_response)

    server = wsgi.Server(("127.0.0.1", share.port), recording, numthreads=4)
    server.prepare()
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield share
    finally:
        server.stop()
