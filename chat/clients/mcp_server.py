"""The MCP server (the official `mcp` SDK's `MCPServer`): the tools `search` and `ask` and the
resource template `sourced://documents/{document_id}`, for assistants that take tools over the
Model Context Protocol. Served over Streamable HTTP at /mcp/ (chat.clients.mcp_asgi) and over
stdio (`manage.py mcp --token ...`).

Who asks: over HTTP, the staff user of the request's Bearer token (put in the ASGI scope by
chat.clients.mcp_asgi, checked on every request); over stdio, the user of the command's token,
checked again on every call. What they may read: knowledge/access.py's `reader_for`, computed
per call; `ask` runs the one answering pipeline (admitted by `staff_throttled`, stored as an
exchange of a private conversation of the user); `search` is GET /api/search's search (its rate
limit; personal files are never searched, as there); a document resource is read through
`document_get_for` (a document the user may not read is unknown, like one that does not exist).
"""

import uuid
from contextlib import aclosing
from contextvars import ContextVar
from typing import Any

from channels.db import database_sync_to_async
from django.contrib.auth.base_user import AbstractBaseUser
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from pydantic import BaseModel, Field

from chat.answering.pipeline import answer_stream
from chat.answering.questions import text_clean
from chat.api.authentication import staff_throttled
from chat.clients.answers import AnswerFold, location_of, passage_link, staff_token_user
from chat.errors import AnswerError
from chat.ratelimit import search_rate_limited, throttled_message
from knowledge.access import documents_readable, reader_for
from knowledge.models import Document
from knowledge.retrieval import TOP_K_MAX, TOP_K_MIN, chunks_search
from knowledge.selectors import document_get_for

USER_KEY = "sourced.user"  # the ASGI scope's key of the authenticated user
DOCUMENT_URI = "sourced://documents/{document_id}"
# The stdio transport has no request: the command's token, and where links point.
stdio_token: ContextVar[str | None] = ContextVar("sourced_mcp_stdio_token", default=None)
stdio_base_url: ContextVar[str] = ContextVar("sourced_mcp_stdio_base_url", default="")

INSTRUCTIONS = (
    "Sourced answers questions from the organisation's own documents (policies, handbooks, "
    "spreadsheets...), citing the page and section of each passage, and only from what the "
    "signed-in user may read. Use `ask` for a question a person would ask (it answers with [n] "
    "citation markers, or says the documents do not hold the answer); use `search` to find "
    "passages yourself; read a whole document with the resource sourced://documents/{id}."
)


class SearchHit(BaseModel):
    document_id: int
    title: str
    collection: str = Field(description="The collection the document is in.")
    page: int | None
    section: str | None
    sheet: str | None = Field(description="Spreadsheets: the sheet of the passage's rows.")
    cells: str | None = Field(description='Spreadsheets: the cells the passage covers, "A4:E6".')
    location: str = Field(description='Where the passage is: "Page 3 · Leave > Annual leave".')
    passage: str
    link: str = Field(description="The document page at this passage, for a person to open.")
    resource: str = Field(description="The document's MCP resource URI (its full text).")
    score: float = Field(description="Relevance, higher is better (fused rank score).")
    similarity: float | None = Field(description="Cosine similarity to the query, 0..1.")


class SearchResults(BaseModel):
    query: str
    results: list[SearchHit]


class Citation(BaseModel):
    n: int = Field(description="The number of the [n] marker in the answer.")
    document_id: int | None
    title: str
    page: int | None
    section: str | None
    sheet: str | None
    cells: str | None
    location: str
    excerpt: str
    link: str
    similarity: float | None
    stale: bool = Field(description="The cited passage has changed or left the knowledge base.")


class Answer(BaseModel):
    answer: str = Field(
        description="The answer with its [n] markers and a Sources list, or the refusal."
    )
    outcome: str = Field(
        description='"answered", "weak_evidence" (the documents may not answer it directly: '
        'say so) or "refused" (the documents do not hold the answer: do not make one up).'
    )
    citations: list[Citation]
    conversation_id: str = Field(description="Pass it to a follow-up question's `ask`.")
    message_id: str
    search_query: str = Field(description="What was searched (a follow-up read in context).")
    warnings: list[str]
    suggestions: list[str] = Field(description="For a refusal: questions the documents answer.")


mcp_server = MCPServer(
    "sourced",
    title="Sourced",
    instructions=INSTRUCTIONS,
    version="1.0.0",
    log_level="WARNING",
)


async def _user_of(ctx: Context) -> AbstractBaseUser:
    request = ctx.request_context.request
    if request is not None:
        user = request.scope.get(USER_KEY)
        if user is None:  # the ASGI app authenticates every request: never reached
            raise ToolError("Not signed in.")
        return user
    try:
        return await database_sync_to_async(staff_token_user)(f"Bearer {stdio_token.get()}")
    except AnswerError as error:
        raise ToolError(error.message) from None


def _base_url(ctx: Context) -> str:
    request = ctx.request_context.request
    if request is not None:
        return str(request.base_url)
    return stdio_base_url.get()


def _search(user: AbstractBaseUser, query: str, limit: int, collection: str | None, base: str):
    retry_after = search_rate_limited(user)
    if retry_after is not None:
        raise ToolError(f"Too many searches: try again in {retry_after} seconds.")
    query = " ".join(text_clean(query).split())
    if not query:
        raise ToolError("The query is empty.")
    if not (TOP_K_MIN <= limit <= TOP_K_MAX):
        raise ToolError(f"limit must be from {TOP_K_MIN} to {TOP_K_MAX}.")
    reader = reader_for(user)
    document_ids = None
    if collection:
        document_ids = list(
            documents_readable(user=reader)
            .filter(collection__name__iexact=collection.strip())
            .values_list("pk", flat=True)
        )
        if not document_ids:
            raise ToolError(f"Unknown collection: {collection!r}.")
    result = chunks_search(query=query, reader=reader, top_k=limit, document_ids=document_ids)
    collections = dict(
        Document.objects.filter(pk__in={c.document_id for c in result.chunks}).values_list(
            "pk", "collection__name"
        )
    )
    hits = []
    for chunk in result.chunks:
        place = {**chunk.as_dict(), "title": chunk.document_title}
        hits.append(
            SearchHit(
                document_id=chunk.document_id,
                title=chunk.document_title,
                collection=collections.get(chunk.document_id) or "",
                page=chunk.page,
                section=chunk.section,
                sheet=chunk.sheet,
                cells=chunk.cells,
                location=location_of(place),
                passage=chunk.text,
                link=passage_link(place, base),
                resource=DOCUMENT_URI.format(document_id=chunk.document_id),
                score=round(chunk.score, 6),
                similarity=None if chunk.similarity is None else round(chunk.similarity, 4),
            )
        )
    return SearchResults(query=query, results=hits)


@mcp_server.tool(
    title="Search the documents",
    description=(
        "Find passages in the organisation's documents (only those the user may read), best "
        "first: each with its document id and title, page, section (or sheet and cells), the "
        "passage text, a link for a person and a relevance score. Use it to look something up "
        "or to explore what the documents say; to answer a question with citations, use `ask`. "
        "`collection` (optional) limits the search to one collection, by its name as shown in "
        "the results."
    ),
)
async def search(
    ctx: Context, query: str, limit: int = 5, collection: str | None = None
) -> SearchResults:
    user = await _user_of(ctx)
    return await database_sync_to_async(_search)(user, query, limit, collection, _base_url(ctx))


@mcp_server.tool(
    title="Ask the documents",
    description=(
        "Answer a question from the organisation's documents (only those the user may read), "
        "with [n] citation markers and the cited passages (title, page, section, link). The "
        "outcome says whether it was answered, answered from weak evidence, or refused because "
        "the documents do not hold the answer: then say so rather than answer from your own "
        'knowledge. For a follow-up question ("and after ten years?"), pass the '
        "conversation_id the previous answer returned, so it is read in context."
    ),
)
async def ask(ctx: Context, question: str, conversation_id: str | None = None) -> Answer:
    user = await _user_of(ctx)
    try:
        throttled = await database_sync_to_async(staff_throttled)(user)
    except AnswerError as error:
        raise ToolError(error.message) from None
    if throttled is not None:
        raise ToolError(throttled_message(throttled))
    fold = AnswerFold(base_url=_base_url(ctx))
    stream = answer_stream(
        user=user,
        question=question,
        message_id=uuid.uuid4(),
        conversation_id=conversation_id or uuid.uuid4(),
        is_private=True,
        conversation_empty=not conversation_id,
    )
    try:
        async with aclosing(stream):
            async for event in stream:
                fold.add(event)
    except AnswerError as error:
        raise ToolError(error.message) from None
    if fold.outcome == "error" and fold.error is not None:
        raise ToolError(fold.error["message"] or "Answering failed; please try again.")
    extension = fold.extension()
    return Answer(
        answer=fold.full_text(),
        outcome=fold.outcome,
        citations=[Citation(**citation) for citation in fold.citations],
        conversation_id=fold.conversation_id,
        message_id=fold.message_id,
        search_query=fold.search_query,
        warnings=extension["warnings"],
        suggestions=fold.suggestions,
    )


def _document_text(user: AbstractBaseUser, document_id: str) -> str:
    try:
        pk = int(document_id)
    except ValueError:
        pk = 0
    document = document_get_for(reader_for(user), pk) if pk > 0 else None
    if document is None:
        raise ResourceNotFoundError(f"Unknown document: {document_id}.")
    parts = [f"# {document.title}"]
    place = None
    for chunk in document.chunks.order_by("index").only(
        "text", "page", "section", "sheet", "cells"
    ):
        here: dict[str, Any] = {
            "page": chunk.page,
            "section": chunk.section,
            "sheet": chunk.sheet,
            "cells": None,
        }
        location = location_of(here)
        if location and location != place:
            parts.append(f"## {location}")
            place = location
        parts.append(chunk.text)
    return "\n\n".join(parts) + "\n"


@mcp_server.resource(
    DOCUMENT_URI,
    name="document",
    title="A document's text",
    description=(
        "The full text of a document the user may read, in order, headed by page and section "
        "(or sheet). The id is a search result's or a citation's document_id."
    ),
    mime_type="text/markdown",
)
async def document(document_id: str, ctx: Context) -> str:
    user = await _user_of(ctx)
    return await database_sync_to_async(_document_text)(user, document_id)
