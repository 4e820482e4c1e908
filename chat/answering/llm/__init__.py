"""Language-model backends of the generative mode (see base.py)."""

from __future__ import annotations

from chat.answering.llm.base import (
    BackendStatus,
    ChatMessage,
    LLMBackend,
    LLMError,
    LLMStreamBroken,
    LLMUnavailable,
    Reply,
    llm_backend,
)

__all__ = [
    "BackendStatus",
    "ChatMessage",
    "LLMBackend",
    "LLMError",
    "LLMStreamBroken",
    "LLMUnavailable",
    "Reply",
    "llm_backend",
]
