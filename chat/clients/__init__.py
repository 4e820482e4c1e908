"""Sourced in other clients: an OpenAI-compatible API under /v1 (`chat.clients.openai_api`) and
an MCP server at /mcp/ and over stdio (`chat.clients.mcp_server`). Both answer through the one
answering pipeline (`chat.answering.pipeline.answer_stream`), admit requests like POST /api/chat
(`chat.api.authentication.staff_throttled`) and read through knowledge/access.py; what they
share is in `chat.clients.answers` (docs/decisions/0155-sourced-in-other-clients.md)."""
