"""The language-model seam of the generative mode: a small interface chosen by a setting.

Like Django's email backends, `settings.LLM_BACKEND` names the class: "openai" (an
OpenAI-compatible chat-completions server: Ollama, vLLM, llama.cpp server, OpenAI), "local" (a
transformers model folder or a GGUF file, loaded in this process), or a dotted path to another
`LLMBackend` subclass.

    backend = llm_backend()
    if backend.configured:
        reply = await backend.open(messages, max_tokens=512)   # LLMUnavailable before a token
        try:
            async for piece in reply:                          # LLMStreamBroken mid-way
                ...
        finally:
            await reply.aclose()                               # cancels the upstream request

A backend reads its configuration from settings when it is made, so a changed setting applies
to the next answer; it holds no connection between answers (a loaded local model is kept by
its module).
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import TypedDict

from django.conf import settings
from django.utils.module_loading import import_string

# Temperature of every generation: low, the answer should repeat the sources, not invent.
TEMPERATURE = 0.1


class ChatMessage(TypedDict):
    role: str  # "system" | "user" | "assistant"
    content: str


class LLMError(Exception):
    """The model could not answer."""


class LLMUnavailable(LLMError):
    """Nothing came back: not configured, unreachable, timed out, refused (after the retries)."""


class LLMStreamBroken(LLMError):
    """The reply broke off after it had started."""


class Reply(abc.ABC):
    """A reply being generated: its text pieces as they come; `aclose` stops the generation
    (closes the upstream request) and is safe to call more than once."""

    @abc.abstractmethod
    def __aiter__(self) -> AsyncIterator[str]: ...

    @abc.abstractmethod
    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class BackendStatus:
    """What the admin page shows about the language model."""

    backend: str
    configured: bool
    model: str
    reachable: bool | None  # None: not checked (not configured)
    detail: str = ""  # why it is not configured / not reachable


class LLMBackend(abc.ABC):
    """Produces chat completions, streamed."""

    name: str = ""

    @property
    @abc.abstractmethod
    def configured(self) -> bool:
        """The settings name a model this backend can use."""

    @property
    @abc.abstractmethod
    def model_name(self) -> str: ...

    @abc.abstractmethod
    async def open(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Reply:
        """Start generating a reply to `messages`; LLMUnavailable when no reply can start."""

    @abc.abstractmethod
    def probe(self) -> str:
        """Check the backend can answer now, quickly (blocking): "" when it can, else why not."""

    def not_configured_reason(self) -> str:
        return ""

    async def complete(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> str:
        """The whole reply as one text."""
        reply = await self.open(messages, max_tokens=max_tokens)
        try:
            return "".join([piece async for piece in reply])
        finally:
            await reply.aclose()

    def status(self, *, check: bool = True) -> BackendStatus:
        if not self.configured:
            return BackendStatus(
                self.name, False, self.model_name, None, self.not_configured_reason()
            )
        problem = self.probe() if check else ""
        return BackendStatus(
            self.name, True, self.model_name, (not problem) if check else None, problem
        )


BACKENDS = {
    "openai": "chat.answering.llm.openai_compatible.OpenAICompatibleBackend",
    "local": "chat.answering.llm.local.LocalBackend",
}


def llm_backend() -> LLMBackend:
    """The backend `settings.LLM_BACKEND` names, configured from the current settings."""
    name = settings.LLM_BACKEND or "openai"
    backend_class = import_string(BACKENDS.get(name, name))
    return backend_class()
