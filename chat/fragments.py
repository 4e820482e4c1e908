"""The HTML fragments of the chat: what the WebSocket consumer sends (htmx swaps them in out
of band) and what the pages' htmx requests get back. Each is a partial of the page template it
belongs to (django-template-partials): `chat/conversation.html#<name>` for the conversation,
`chat/layout.html#<name>` for the sidebar; every text is autoescaped or `format_html`. Why
HTML fragments over the socket: docs/decisions/0044-html-fragments-over-the-socket.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.template.loader import render_to_string
from django.utils.html import format_html

from chat.models import Conversation, Message
from chat.presenters import MessageView
from knowledge.models import Document
from pages import sidebar_context


def message_html(view: MessageView, *, oob: str = "") -> str:
    """One message, optionally marked for an out-of-band swap (`true`, `outerHTML:#id`)."""
    return render_to_string("chat/conversation.html#message", {"m": view, "oob": oob})


def answer_start_html(
    data: Mapping[str, Any],
    *,
    question: str,
    question_id: str,
    warning: str = "",
    replace_target: str = "",
) -> str:
    """The answer's bubble as it starts streaming, from an `answer_start` event's data: the
    typing indicator, the question's warning, and what retrieval searched for (the data's
    `search_query`, shown when it is not the question itself). Appended to the messages, or
    in place of `replace_target` (the selector of the answer it replaces)."""
    view = MessageView(
        id=str(data["message_id"]),
        role=Message.Role.ASSISTANT,
        status=Message.Status.STREAMING,
        warning=warning,
        question=question,
        reply_to_id=str(data.get("reply_to") or question_id),
        search_query=str(data.get("search_query") or ""),
    )
    if replace_target:
        return message_html(view, oob=f"outerHTML:{replace_target}")
    return append_to_messages(message_html(view))


def append_to_messages(html: str) -> str:
    return f'<div hx-swap-oob="beforeend:#messages">{html}</div>'


def delta_html(message_id: str, text: str) -> str:
    """One piece of the answer, escaped, appended to the streaming bubble's body."""
    return format_html('<div hx-swap-oob="beforeend:#msg-{}-body">{}</div>', message_id, text)


def sources_html(view: MessageView) -> str:
    return render_to_string("chat/conversation.html#sources-slot", {"m": view, "oob": True})


def evidence_html(view: MessageView) -> str:
    """The answer's weak-evidence notice slot, swapped in place (empty unless `view.is_weak`)."""
    return render_to_string("chat/conversation.html#weak-evidence", {"m": view, "oob": True})


def warning_html(message_id: str, text: str) -> str:
    return render_to_string(
        "chat/conversation.html#warning", {"text": text, "target": f"#msg-{message_id}-warnings"}
    )


def notice_html(text: str, *, level: str = "warning", retry: bool = False) -> str:
    """A passing notice in the conversation (rate limit, read-only, refused request)."""
    return append_to_messages(
        render_to_string(
            "chat/conversation.html#notice", {"text": text, "level": level, "retry": retry}
        )
    )


def state_html(*, busy: bool, conversation_id: str = "", conversation_url: str = "") -> str:
    """The stream state the page's script follows (composer enabled, Stop shown, URL)."""
    return render_to_string(
        "chat/conversation.html#chat-state",
        {
            "busy": busy,
            "conversation_id": conversation_id,
            "conversation_url": conversation_url,
            "oob": True,
        },
    )


# --- The sidebar and the conversation's header -------------------------------------------------


def conversation_list_html(user, *, active_id: str = "", focus_id: str = "") -> str:
    """The sidebar's conversation list as it is now, out of band: a conversation that just got
    a question or a new title is at the top of its group. `focus_id`: the conversation whose
    rename button takes the focus (after renaming it in the sidebar)."""
    context = {**sidebar_context(user, active_id=active_id), "user": user, "list_oob": True}
    return render_to_string("chat/layout.html#conversation-list", {**context, "focus_id": focus_id})


def sidebar_item_moved_html(conversation: Conversation, *, user) -> str:
    """`conversation`'s sidebar item, highlighted, moved out of band to the top of its group
    (right after the group's title), wherever it was in the list or if it was not there: what
    a question asked in it changes in a list the page already shows. Its other items stay as
    they are."""
    item = render_to_string(
        "chat/layout.html#sidebar-item",
        {"conversation": conversation, "user": user, "active_id": str(conversation.pk)},
    )
    group = "private" if conversation.is_private else "shared"
    return (
        f'<li id="sidebar-{conversation.pk}" hx-swap-oob="delete"></li>'
        f'<ul hx-swap-oob="afterend:#group-{group}">{item}</ul>'
    )


def sidebar_item_html(conversation: Conversation, *, user, active_id: str = "") -> str:
    """One conversation of the sidebar (after its title editor is closed), its rename button
    focused."""
    context = {
        "conversation": conversation,
        "user": user,
        "active_id": active_id,
        "focus_id": str(conversation.pk),
    }
    return render_to_string("chat/layout.html#sidebar-item", context)


def conversation_header_html(conversation: Conversation, *, user) -> str:
    """The conversation page's header, out of band (when the first question created it)."""
    context = {"conversation": conversation, "user": user, "oob": True}
    return render_to_string("chat/conversation.html#conversation-header", context)


def conversation_title_html(
    conversation: Conversation, *, user, oob: bool = False, focus: bool = False
) -> str:
    """The title in the conversation page's header with its rename button (`focus`: the
    button takes the focus), in place of the title editor or (`oob`) out of band."""
    context = {"conversation": conversation, "user": user, "title_oob": oob, "focus_rename": focus}
    return render_to_string("chat/conversation.html#conversation-title", context)


def conversation_renamed_html(
    conversation: Conversation, *, user, shown_id: str, place: str
) -> str:
    """What changes on a page once `conversation` is renamed from its `place` ("header" or
    "sidebar"), all out of band: when the page shows this conversation (`shown_id`), the
    browser tab's title and the header's; always the sidebar, where renaming made the
    conversation the most recent. The rename button where the editor was takes the focus."""
    html = ""
    if shown_id == str(conversation.pk):
        html = format_html("<title>{} · Sourced</title>", conversation.title)
        html += conversation_title_html(conversation, user=user, oob=True, focus=place == "header")
    focus_id = str(conversation.pk) if place == "sidebar" else ""
    return html + conversation_list_html(user, active_id=shown_id, focus_id=focus_id)


def file_chip_html(document: Document) -> str:
    """A personal file's chip in the composer, its state as now, replacing the one shown
    (`#file-<id>`, out of band): what its owner's socket sends when its reading ends."""
    return render_to_string("chat/partials/attachment_chip.html", {"file": document, "oob": True})
