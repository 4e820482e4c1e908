"""What the OpenAI-compatible API and the MCP server share: an answer's events folded into one
result (`AnswerFold`), its citations as those clients get them (a link to the cited passage),
the Markdown "Sources" list that ends the answer's text, and which stored conversation a
client's request continues.

An answer's outcome: "answered", "weak_evidence" (answered from weak support: the text carries
the weak-evidence notice of `docs/product.md §4`), "refused" (the text is the refusal) or
"error" (answering failed after it started: `error` holds the pipeline's code and message).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.base_user import AbstractBaseUser
from django.urls import NoReverseMatch

from chat.answering.events import Event
from chat.answering.evidence import WEAK_EVIDENCE_NOTICE
from chat.answering.questions import question_normalize
from chat.api.authentication import token_user
from chat.errors import AnswerError
from chat.models import Conversation, Message
from chat.templatetags.chat_urls import id_url
from knowledge.access import user_is_staff

# uuid5 namespace of the message ids made from a client's idempotency key.
IDEMPOTENCY_NAMESPACE = uuid.UUID("0b9f4a52-6a1e-4c0e-9a59-5f0d6c3b1f39")
# Conversations compared when a request's earlier messages name no conversation.
MATCH_CANDIDATES = 20


def passage_link(citation: dict[str, Any], base_url: str = "") -> str:
    """The app's document page scrolled to (and highlighting) the cited passage, absolute when
    `base_url` is given; the citation's own URL when the document has no page here."""
    document_id, chunk_id = citation.get("document_id"), citation.get("chunk_id")
    try:
        url = id_url("knowledge:document", document_id) if document_id else ""
    except NoReverseMatch:
        url = ""
    if not url:
        return citation.get("url") or ""
    if chunk_id:
        query = {"chunk": chunk_id}
        if citation.get("sheet") and citation.get("cells"):
            query["cells"] = citation["cells"]
        url += f"?{urlencode(query)}#chunk-{chunk_id}"
    return base_url.rstrip("/") + url


def location_of(citation: dict[str, Any]) -> str:
    """ "Page 3 · Leave > Annual leave", "Stocks!A4:E4", "" when the passage has no place."""
    parts = []
    if citation.get("sheet"):
        cells = citation.get("cells")
        parts.append(f"{citation['sheet']}!{cells}" if cells else citation["sheet"])
    elif citation.get("page"):
        parts.append(f"Page {citation['page']}")
    if citation.get("section") and not citation.get("sheet"):
        parts.append(citation["section"])
    return " · ".join(parts)


def client_citation(citation: dict[str, Any], base_url: str = "") -> dict[str, Any]:
    """A stored citation (`chat.citations.citation_as_dict`) as these clients get it:
    without the passage's full text (`excerpt` is its beginning), with `location` and `link`."""
    return {
        "n": citation["n"],
        "document_id": citation.get("document_id"),
        "title": citation.get("title", ""),
        "page": citation.get("page"),
        "section": citation.get("section"),
        "sheet": citation.get("sheet"),
        "cells": citation.get("cells"),
        "location": location_of(citation),
        "excerpt": citation.get("excerpt", ""),
        "link": passage_link(citation, base_url),
        "similarity": citation.get("similarity"),
        "stale": bool(citation.get("stale")),
    }


def _markdown_text(text: str) -> str:
    return text.replace("[", "\\[").replace("]", "\\]")


def sources_markdown(citations: list[dict[str, Any]]) -> str:
    """The "Sources" list that ends an answer's text (client citations), or ""."""
    if not citations:
        return ""
    lines = ["**Sources**", ""]
    for citation in citations:
        title = _markdown_text(citation["title"] or "Untitled document")
        entry = f"[{title}]({citation['link']})" if citation["link"] else title
        location = citation["location"]
        lines.append(f"- \\[{citation['n']}\\] {entry}" + (f" — {location}" if location else ""))
    return "\n".join(lines)


@dataclass
class AnswerFold:
    """The events of one answer, folded as they come (`add`), and the result they make."""

    base_url: str = ""
    conversation_id: str = ""
    message_id: str = ""
    search_query: str = ""
    text: str = ""
    outcome: str = ""
    citations: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    searched_document: dict[str, Any] | None = None
    searched_documents: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, str] | None = None

    def add(self, event: Event) -> None:
        data = event.data
        if event.type == "warning":
            self.warnings.append(data.get("message", ""))
        elif event.type in ("answer_start", "refusal"):
            self.conversation_id = data.get("conversation_id", "")
            self.message_id = data.get("message_id", "")
            self.search_query = data.get("search_query", "")
            if event.type == "refusal":
                self.outcome = "refused"
                self.text = data.get("message", "")
                self.suggestions = list(data.get("suggestions") or [])
        elif event.type == "answer_delta":
            self.text += data.get("text", "")
        elif event.type == "sources":
            self.citations = [client_citation(c, self.base_url) for c in data["citations"]]
            self.searched_document = data.get("searched_document")
            self.searched_documents = list(data.get("searched_documents") or [])
            self.outcome = "weak_evidence" if data.get("evidence") == "weak" else "answered"
        elif event.type == "error":
            self.outcome = "error"
            self.error = {"code": data.get("code", "internal"), "message": data.get("message", "")}

    def ending(self) -> str:
        """What follows the streamed text in a text-only client: the weak-evidence notice, the
        suggestions of a refusal, and the Sources list."""
        parts = []
        if self.outcome == "weak_evidence":
            parts.append(f"_{WEAK_EVIDENCE_NOTICE}_")
        if self.outcome == "refused" and self.suggestions:
            parts.append("You could ask:\n" + "\n".join(f"- {s}" for s in self.suggestions))
        sources = sources_markdown(self.citations)
        if sources:
            parts.append(sources)
        return "".join(f"\n\n{part}" for part in parts)

    def full_text(self) -> str:
        return self.text + self.ending()

    def extension(self) -> dict[str, Any]:
        """The structured answer: the `sourced` field of the OpenAI API, the MCP `ask` result."""
        return {
            "conversation_id": self.conversation_id,
            "message_id": self.message_id,
            "outcome": self.outcome,
            "citations": self.citations,
            "searched_document": self.searched_document,
            "searched_documents": self.searched_documents,
            "search_query": self.search_query,
            "warnings": [w for w in self.warnings if w],
            "suggestions": self.suggestions,
        }


def staff_token_user(authorization: str) -> AbstractBaseUser:
    """The staff user of an `Authorization: Bearer <API token>` header (`Token <key>` works
    too). Synchronous (database). Raises AnswerError: unauthorized (401) without a valid
    token, forbidden (403) for a user who is not staff."""
    user = token_user(authorization)
    if user is None:
        raise AnswerError("unauthorized", "Send your API token: Authorization: Bearer <token>.")
    if not user_is_staff(user):
        raise AnswerError.forbidden("Sourced is for staff only.")
    return user


def message_id_for(user: AbstractBaseUser, key: str | None) -> uuid.UUID:
    """The question's message id (the pipeline's idempotency key): a client's key that is a
    UUID as it is, any other key made into one for this user; none: a new id."""
    if not key:
        return uuid.uuid4()
    try:
        return uuid.UUID(key)
    except ValueError:
        return uuid.uuid5(IDEMPOTENCY_NAMESPACE, f"{user.pk}:{key}")


def conversation_of_question(user: AbstractBaseUser, message_id: uuid.UUID) -> uuid.UUID | None:
    """The conversation of `user`'s question `message_id` (a retry of a stored exchange), or
    None. Synchronous (database)."""
    return (
        Message.objects.filter(pk=message_id, role=Message.Role.USER, conversation__owner=user)
        .values_list("conversation_id", flat=True)
        .first()
    )


def conversation_continued(user: AbstractBaseUser, questions: list[str]) -> uuid.UUID | None:
    """The conversation of `user` whose questions are exactly `questions` (the earlier user
    messages of a client that sends the whole conversation each time), most recent first; None
    when there is none. Synchronous (database)."""
    try:
        wanted = [question_normalize(q) for q in questions]
    except AnswerError:
        return None
    if not wanted:
        return None
    candidates = (
        Conversation.objects.filter(
            owner=user, messages__role=Message.Role.USER, messages__content=wanted[0]
        )
        .order_by("-updated_at")
        .values_list("pk", flat=True)
        .distinct()[:MATCH_CANDIDATES]
    )
    for conversation_id in candidates:
        asked = list(
            Message.objects.filter(conversation_id=conversation_id, role=Message.Role.USER)
            .order_by("created_at", "id")
            .values_list("content", flat=True)
        )
        if asked == wanted:
            return conversation_id
    return None
