"""An MCP client session over Streamable HTTP with the `mcp` package's own client (its
`ClientSession` on its `streamable_http_client` transport), signed in with an API token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


@asynccontextmanager
async def mcp_session(base_url: str, key: str) -> AsyncIterator[ClientSession]:
    """An initialized session with the server at `base_url`/mcp/ as the token's user."""
    headers = {"Authorization": f"Bearer {key}"}
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(f"{base_url}/mcp/", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session
