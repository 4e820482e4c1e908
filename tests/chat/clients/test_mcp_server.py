"""The MCP server at /mcp/ through the `mcp` package's `ClientSession` over Streamable HTTP,
against a real server (daphne in a subprocess, the test database): initialize, the tools and
their descriptions, `search`, `ask` (answered, follow-up, refused), a document resource, an
unauthorised call; and the stdio entry (`manage.py mcp --token`) through the package's stdio
client."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import httpx
import pytest
from asgiref.sync import sync_to_async
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from accounts.services import api_token_create
from chat.models import Conversation, Message
from tests.support.knowledge_base import EXPENSES_TEXTS, document_create
from tests.support.live_server import TEST_SETTINGS, daphne_server, database_url_of
from tests.support.mcp_client import mcp_session

pytestmark = pytest.mark.django_db(transaction=True)

BASE_DIR = Path(__file__).resolve().parents[3]
TRAVEL_TEXTS = [
    "The nightly hotel cap is 180 euros in Lisbon and 240 euros in London. "
    "Hotels above the cap need the approval of a director. "
    "Book hotels through the travel desk at least two weeks ahead.",
    "Trains are the preferred way to travel between cities less than five hours apart. "
    "First class is allowed only for journeys longer than three hours.",
]
LISBON = "What is the nightly hotel cap in Lisbon?"
LONDON = "And in London?"
OFF_TOPIC = "What is the boiling point of liquid nitrogen on Neptune's moons?"


@pytest.fixture
def travel_kb(db):
    return {
        "travel": document_create(
            title="Travel policy", texts=TRAVEL_TEXTS, pages=[2, 3], sections=["Hotels", "Trains"]
        ),
        "expenses": document_create(title="Expenses policy", texts=EXPENSES_TEXTS),
    }


@pytest.fixture
def key(staff_user) -> str:
    return api_token_create(user=staff_user, name="mcp tests")[1]


async def test_initialize_and_list_tools_with_descriptions_and_schemas(live_server_url, key):
    async with mcp_session(live_server_url, key) as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        templates = (await session.list_resource_templates()).resource_templates

    assert set(tools) == {"search", "ask"}
    assert set(tools["search"].input_schema["properties"]) == {"query", "limit", "collection"}
    assert tools["search"].input_schema["required"] == ["query"]
    assert set(tools["ask"].input_schema["properties"]) == {"question", "conversation_id"}
    assert "refused" in tools["ask"].description and "`ask`" in tools["search"].description
    assert "citations" in tools["ask"].output_schema["properties"]
    assert [t.uri_template for t in templates] == ["sourced://documents/{document_id}"]


async def test_search_returns_structured_passages(travel_kb, live_server_url, key):
    async with mcp_session(live_server_url, key) as session:
        result = await session.call_tool("search", {"query": "hotel cap in London", "limit": 3})

    assert not result.is_error
    hits = result.structured_content["results"]
    assert 1 <= len(hits) <= 3
    best = hits[0]
    travel = travel_kb["travel"]
    assert best["document_id"] == travel.pk and best["title"] == "Travel policy"
    assert best["page"] == 2 and best["section"] == "Hotels"
    assert "240 euros in London" in best["passage"]
    assert best["link"].startswith(f"{live_server_url}/documents/{travel.pk}/?chunk=")
    assert best["resource"] == f"sourced://documents/{travel.pk}"
    assert best["collection"] and best["score"] > 0


async def test_search_in_an_unknown_collection_is_a_tool_error(travel_kb, live_server_url, key):
    async with mcp_session(live_server_url, key) as session:
        result = await session.call_tool("search", {"query": "hotel", "collection": "Nope"})
    assert result.is_error and "Unknown collection" in result.content[0].text


async def test_ask_answers_with_citations_and_a_follow_up_continues(
    travel_kb, live_server_url, key, staff_user
):
    async with mcp_session(live_server_url, key) as session:
        first = await session.call_tool("ask", {"question": LISBON})
        answer = first.structured_content
        follow_up = await session.call_tool(
            "ask", {"question": LONDON, "conversation_id": answer["conversation_id"]}
        )

    assert answer["outcome"] == "answered"
    assert "180 euros" in answer["answer"] and "[1]" in answer["answer"]
    assert "**Sources**" in answer["answer"]
    citation = answer["citations"][0]
    assert citation["document_id"] == travel_kb["travel"].pk and citation["page"] == 2
    second = follow_up.structured_content
    assert "240 euros in London" in second["answer"]
    assert second["conversation_id"] == answer["conversation_id"]
    assert second["search_query"] != LONDON
    conversation = await Conversation.objects.aget(pk=answer["conversation_id"])
    assert conversation.owner_id == staff_user.pk and conversation.is_private
    assert await Message.objects.filter(conversation=conversation).acount() == 4


async def test_ask_refuses_what_the_documents_do_not_hold(travel_kb, live_server_url, key):
    async with mcp_session(live_server_url, key) as session:
        result = await session.call_tool("ask", {"question": OFF_TOPIC})
    assert not result.is_error
    assert result.structured_content["outcome"] == "refused"
    assert result.structured_content["citations"] == []


async def test_a_document_resource_is_its_text_by_page_and_section(travel_kb, live_server_url, key):
    travel = travel_kb["travel"]
    async with mcp_session(live_server_url, key) as session:
        result = await session.read_resource(f"sourced://documents/{travel.pk}")
        with pytest.raises(Exception, match="Unknown document"):
            await session.read_resource("sourced://documents/999999")

    text = result.contents[0].text
    assert text.startswith("# Travel policy\n\n## Page 2 · Hotels\n\nThe nightly hotel cap")
    assert "## Page 3 · Trains\n\nTrains are the preferred" in text


async def test_a_server_that_has_read_a_resource_stops_at_once(travel_kb, key):
    """SIGTERM ends a web process that has served a document resource within seconds. The
    SDK reads a resource through AnyIO's worker threads, which waited for ever once daphne's
    loop had stopped, so the process stayed until killed (chat/clients/mcp_asgi.py)."""
    from django.db import connection

    travel = travel_kb["travel"]
    with daphne_server(database_url_of(connection.settings_dict)) as url:
        async with mcp_session(url, key) as session:
            result = await session.read_resource(f"sourced://documents/{travel.pk}")
        assert result.contents[0].text.startswith("# Travel policy")
        stopping = time.monotonic()
    assert time.monotonic() - stopping < 5  # daphne_server kills it after 15 s


async def test_an_unauthorised_call_is_refused(travel_kb, live_server_url):
    # The SDK's client turns the 401 into an MCPError of its task group; the raw request
    # below shows the 401 itself.
    with pytest.raises(ExceptionGroup) as raised:
        async with mcp_session(live_server_url, "not-a-token") as session:
            await session.call_tool("search", {"query": "hotel"})
    assert raised.group_contains(MCPError, match="error response")

    async with httpx.AsyncClient() as http:
        response = await http.post(
            f"{live_server_url}/mcp/",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": "Bearer not-a-token"},
        )
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthorized"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


async def test_the_stdio_entry_answers_as_the_tokens_user(travel_kb, key, staff_user):
    from django.db import connection

    environment = {
        **os.environ,
        "DATABASE_URL": database_url_of(connection.settings_dict),
        "DJANGO_SETTINGS_MODULE": TEST_SETTINGS,
    }
    server = StdioServerParameters(
        command=sys.executable,
        args=["manage.py", "mcp", "--token", key, "--base-url", "http://sourced.example"],
        env=environment,
        cwd=str(BASE_DIR),
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("ask", {"question": LISBON})
    answer = result.structured_content
    assert answer["outcome"] == "answered" and "180 euros" in answer["answer"]
    assert answer["citations"][0]["link"].startswith("http://sourced.example/documents/")
    stored = await sync_to_async(Message.objects.select_related("conversation").get)(
        pk=answer["message_id"]
    )
    assert stored.conversation.owner_id == staff_user.pk and stored.conversation.is_private
