"""HTTP for site and share syncs: one host only, polite, and bounded in size and time.

Every request of a sync goes through one `Fetcher`: it refuses any URL off the source's host
(redirects are followed by the callers, one hop at a time, within scope), waits between
requests (`SOURCE_REQUESTS_PER_SECOND`, or the site's robots.txt Crawl-delay when longer),
stops reading a body past `SOURCE_MAX_BYTES`, gives up on a response not complete within
`SOURCE_RESPONSE_SECONDS` (connect and each read time out after `SOURCE_TIMEOUT_SECONDS`), and
answers `out_of_time` once the run has lasted `SOURCE_RUN_SECONDS`. A request runs on a
daemon thread of its own that the sync waits for at most `SOURCE_RESPONSE_SECONDS`: a server
that drips its headers one byte at a time cannot hold the worker
(docs/decisions/0161-hostile-sources-bounded.md).
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass

import httpx
from django.conf import settings

from knowledge.sources.locations import url_origin


class FetchError(Exception):
    """A request that gave no usable response; the message is meant for the run's log.
    `bound` is True when one of our bounds stopped it (size, time), False for the network or
    the server failing."""

    def __init__(self, message: str, *, bound: bool = False) -> None:
        super().__init__(message)
        self.bound = bound


@dataclass
class Response:
    url: str
    status: int
    headers: httpx.Headers
    body: bytes


def _megabytes(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB"


class Fetcher:
    """Requests to one origin (scheme://host:port), one at a time, within the bounds above.
    `headers` (the User-Agent, the credentials) go with every request."""

    def __init__(self, *, origin: str, headers: dict[str, str] | None = None) -> None:
        self.origin = origin
        self.requests = 0
        self.min_interval = 1.0 / settings.SOURCE_REQUESTS_PER_SECOND
        self._headers = {"User-Agent": settings.SOURCE_USER_AGENT, **(headers or {})}
        self._client = self._client_new()
        self._last = 0.0
        self._deadline = time.monotonic() + settings.SOURCE_RUN_SECONDS

    def _client_new(self) -> httpx.Client:
        # trust_env=False: no proxy, no .netrc; the request goes to the source's host only.
        return httpx.Client(
            trust_env=False,
            follow_redirects=False,
            timeout=httpx.Timeout(settings.SOURCE_TIMEOUT_SECONDS),
            headers=self._headers,
        )

    def out_of_time(self) -> bool:
        return time.monotonic() >= self._deadline

    def close(self) -> None:
        self._client.close()

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        max_bytes: int | None = None,
    ) -> Response:
        """The response to one request (redirects are not followed), its body read whole.
        `FetchError` for a URL off the source's host, a network failure, a body over
        `max_bytes` (default `SOURCE_MAX_BYTES`) or a response slower than
        `SOURCE_RESPONSE_SECONDS`."""
        if url_origin(url) != self.origin:
            raise FetchError(f"{url} is not on {self.origin}; not requested.", bound=True)
        limit = max_bytes or settings.SOURCE_MAX_BYTES
        wait = self._last + self.min_interval - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        self._last = time.monotonic()
        self.requests += 1
        seconds = settings.SOURCE_RESPONSE_SECONDS
        answers: queue.Queue = queue.Queue(maxsize=1)
        client = self._client
        thread = threading.Thread(
            target=self._request_into,
            args=(answers, client, method, url, headers, content, limit, seconds),
            name="source-fetch",
            daemon=True,
        )
        thread.start()
        try:
            outcome = answers.get(timeout=seconds + 1)
        except queue.Empty:
            # The thread is left to its read timeouts; its connection is not reused.
            self._client = self._client_new()
            raise FetchError(
                f"{url} gave no complete response within {seconds:g} s; given up.", bound=True
            ) from None
        if isinstance(outcome, FetchError):
            raise outcome
        return outcome

    @staticmethod
    def _request_into(
        answers: queue.Queue,
        client: httpx.Client,
        method: str,
        url: str,
        headers: dict[str, str] | None,
        content: bytes | None,
        limit: int,
        seconds: float,
    ) -> None:
        started = time.monotonic()
        try:
            with client.stream(method, url, headers=headers, content=content) as response:
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit:
                    raise FetchError(
                        f"{url} is {_megabytes(int(declared))}, over the limit of "
                        f"{_megabytes(limit)} (SOURCE_MAX_BYTES); skipped.",
                        bound=True,
                    )
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > limit:
                        raise FetchError(
                            f"{url} is over the limit of {_megabytes(limit)} "
                            "(SOURCE_MAX_BYTES); skipped.",
                            bound=True,
                        )
                    if time.monotonic() - started > seconds:
                        raise FetchError(
                            f"{url} took longer than {seconds:g} s to send "
                            "(SOURCE_RESPONSE_SECONDS); given up.",
                            bound=True,
                        )
                answers.put(Response(url, response.status_code, response.headers, bytes(body)))
        except FetchError as exc:
            answers.put(exc)
        except httpx.TimeoutException:
            answers.put(FetchError(f"{url} timed out (SOURCE_TIMEOUT_SECONDS); kept as it was."))
        except (httpx.HTTPError, OSError, ValueError) as exc:
            answers.put(FetchError(f"{url} could not be fetched ({type(exc).__name__}: {exc})."))
