"""An OpenAI-compatible chat-completions server, streamed (Ollama, vLLM, llama.cpp server,
OpenAI): `LLM_BASE_URL` (e.g. http://127.0.0.1:11434/v1 for Ollama), `LLM_MODEL`,
`LLM_API_KEY` (servers that need none accept any), `LLM_TIMEOUT_S`.

Resilience is the `openai` client's own: `timeout` (connect, and between two pieces of the
reply) and `max_retries` (connection errors, timeouts, 408/409/429/5xx, with its backoff and the
server's Retry-After), which all happen before the first token; a reply that breaks off later
is never retried (the user has already seen part of it). A client is made per reply and closed
with it: nothing is bound to an event loop between answers. Its TLS context, which is bound to
no loop, is built once per process (`tls_context`).
"""

from __future__ import annotations

import functools
import logging
import ssl
from collections.abc import AsyncIterator, Sequence

import httpx
import openai
from django.conf import settings

from chat.answering.llm.base import (
    TEMPERATURE,
    ChatMessage,
    LLMBackend,
    LLMStreamBroken,
    LLMUnavailable,
    Reply,
)

logger = logging.getLogger(__name__)
PROBE_TIMEOUT_S = 3.0


def error_text(error: BaseException) -> str:
    """A short, readable reason for the admin page and the logs."""
    if isinstance(error, openai.APIStatusError):
        return f"HTTP {error.status_code}: {str(error.message)[:300]}"
    if isinstance(error, openai.APITimeoutError):
        return "timed out"
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__
        return f"cannot connect ({cause or error})"[:300]
    return f"{type(error).__name__}: {error}"[:300]


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The TLS context every client of this module verifies the server with: httpx's default
    (the certifi roots, or `SSL_CERT_FILE` / `SSL_CERT_DIR`), built once per process and shared
    by the clients made per reply (why: docs/decisions/0150-answer-cost-per-question.md)."""
    return httpx.create_ssl_context()


class OpenAIReply(Reply):
    def __init__(self, client: openai.AsyncOpenAI, stream: openai.AsyncStream) -> None:
        self._client = client
        self._stream = stream
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[str]:
        finished = False
        try:
            async for chunk in self._stream:
                for choice in chunk.choices:
                    text = choice.delta.content if choice.delta else None
                    if text:
                        yield text
                    finished = finished or choice.finish_reason is not None
        except (openai.APIError, httpx.HTTPError) as error:
            raise LLMStreamBroken(error_text(error)) from error
        if not finished:  # the connection closed before the server said the reply was done
            raise LLMStreamBroken("the reply ended without a finish reason (connection lost)")

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._stream.close()  # closes the HTTP response: the server sees it go
        finally:
            await self._client.close()


class OpenAICompatibleBackend(LLMBackend):
    name = "openai"

    def __init__(self) -> None:
        self.base_url = settings.LLM_BASE_URL
        self.model = settings.LLM_MODEL
        self.api_key = settings.LLM_API_KEY or "not-needed"
        self.timeout = settings.LLM_TIMEOUT_S
        self.max_retries = settings.LLM_MAX_RETRIES

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)

    @property
    def model_name(self) -> str:
        return self.model

    def not_configured_reason(self) -> str:
        return "Set LLM_BASE_URL and LLM_MODEL (an OpenAI-compatible server)."

    def _client(self, *, timeout: float | None = None, max_retries: int | None = None):
        return openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self.api_key,
            timeout=self.timeout if timeout is None else timeout,
            max_retries=self.max_retries if max_retries is None else max_retries,
            http_client=openai.DefaultAsyncHttpxClient(verify=tls_context()),
        )

    async def open(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Reply:
        if not self.configured:
            raise LLMUnavailable(self.not_configured_reason())
        client = self._client()
        try:
            stream = await client.chat.completions.create(
                model=self.model,
                messages=list(messages),
                temperature=TEMPERATURE,
                max_tokens=max_tokens,
                stream=True,
            )
        except BaseException as error:
            await client.close()
            if isinstance(error, (openai.APIError, httpx.HTTPError)):
                raise LLMUnavailable(error_text(error)) from error
            raise
        return OpenAIReply(client, stream)

    def probe(self) -> str:
        """GET {base}/models, one try, a short timeout."""
        client = openai.OpenAI(
            base_url=self.base_url,
            api_key=self.api_key,
            timeout=min(self.timeout, PROBE_TIMEOUT_S),
            max_retries=0,
            http_client=openai.DefaultHttpxClient(verify=tls_context()),
        )
        try:
            client.models.list()
        except (openai.APIError, httpx.HTTPError) as error:
            return error_text(error)
        finally:
            client.close()
        return ""
