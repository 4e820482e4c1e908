"""Browser pages of the chat: thin adapters that read through selectors and render templates.

The answer itself streams over the WebSocket (chat.consumers); these views render the pages
around it and take the small form and htmx posts (rename, delete, feedback).
"""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

from django.conf import settings
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import Resolver404, resolve, reverse
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from accounts.selectors import preferences_of
from chat.answering.evidence import chat_settings_get
from chat.answering.generative import model_health
from chat.attachments import conversation_attachments
from chat.errors import AnswerError
from chat.fragments import conversation_renamed_html, conversation_title_html, sidebar_item_html
from chat.history import conversations_search, history_items, query_clean
from chat.models import ChatSettings, Conversation, Feedback, Message
from chat.page_parts import document_options_html, page_with_parts, transcript_html
from chat.presenters import message_views
from chat.question_links import question_link_trusted
from chat.selectors import (
    ConversationAccess,
    conversation_access,
    conversation_get_for,
    message_get_for,
    question_last_asked_by,
)
from chat.services import (
    TITLE_MAX_CHARS,
    answers_release_stale,
    conversation_check_owner,
    conversation_clear,
    conversation_delete,
    conversation_rename,
    feedback_give,
)
from chat.transcript import conversation_transcript
from knowledge.access import UserLike, reader_for
from knowledge.search_scope import knowledge_base_is_empty, searchable_documents
from pages import no_access, sidebar_context, staff_required
from pages.client_input import client_int

HISTORY_PAGE_SIZE = 25
# The Feedback model's comment limit (the API's too).
FEEDBACK_COMMENT_MAX_CHARS = Feedback._meta.get_field("comment").max_length

SUGGESTIONS = [
    {
        "title": "Time off",
        "question": "How many days of annual leave do I get?",
        "icon": "icon-[lucide--tree-palm]",
        "tone": "bg-primary/10 text-primary",
    },
    {
        "title": "Expenses",
        "question": "How do I claim travel expenses?",
        "icon": "icon-[lucide--receipt]",
        "tone": "bg-secondary/10 text-secondary",
    },
    {
        "title": "Security",
        "question": "What should I do if I receive a phishing email?",
        "icon": "icon-[lucide--shield-check]",
        "tone": "bg-accent/10 text-accent",
    },
    {
        "title": "Customers",
        "question": "What is our refund policy?",
        "icon": "icon-[lucide--badge-dollar-sign]",
        "tone": "bg-info/10 text-info",
    },
]


def greeting_for(now=None) -> str:
    hour = timezone.localtime(now).hour
    if hour < 12:
        return "Good morning"
    if hour < 18:
        return "Good afternoon"
    return "Good evening"


def composer_context(user: UserLike, *, is_new: bool, last_question: str) -> dict:
    """The composer's context; `user` a user or the request's `Reader` (whether there is any
    document they may search decides whether the settings dialog offers a document list)."""
    chat_settings = chat_settings_get()
    generative = chat_settings.generation_mode == ChatSettings.Mode.GENERATIVE
    return {
        "top_k": chat_settings.default_top_k,
        "model_health": model_health() if generative else None,
        # The settings dialog loads its list of documents when it is first opened
        # (`document_options`): with thousands of documents it is megabytes, on every page.
        "documents": searchable_documents(reader=reader_for(user)).exists(),
        "max_chars": settings.CHAT_MAX_MESSAGE_CHARS,
        "last_question": last_question,
        "is_new": is_new,
    }


def conversation_not_found(request: HttpRequest) -> HttpResponse:
    return no_access(
        request,
        reason="This conversation does not exist, was deleted, or is private to someone else.",
        status=404,
    )


@staff_required
def home(request: HttpRequest) -> HttpResponse:
    """A new chat: greeting, suggestion cards, the composer. The conversation is created by the
    first question, under the id chosen here."""
    return new_chat_page(request)


def new_chat_page(
    request: HttpRequest,
    *,
    prefill: str = "",
    autosend: bool = False,
    notice: str = "",
    private: bool = False,
) -> HttpResponse:
    """The new chat's page; `prefill` is put in the composer, which sends it once the page's
    socket is open when `autosend` is set; `notice` is shown above the composer; `private`
    checks the composer's "Private" box."""
    conversation_id = str(uuid.uuid4())
    last_question = question_last_asked_by(request.user)
    reader = reader_for(request.user)
    context = {
        "conversation": None,
        "conversation_id": conversation_id,
        "ws_url": f"/ws/chat/{conversation_id}/",
        "can_post": True,
        "greeting": greeting_for(),
        "suggestions": SUGGESTIONS,
        "knowledge_ready": not knowledge_base_is_empty(reader=reader),
        "autofocus": True,
        "prefill": prefill,
        "autosend": autosend,
        "link_notice": notice,
        "private": private,
        **composer_context(reader, is_new=True, last_question=last_question),
        **sidebar_context(request.user),
    }
    return conversation_page(request, context)


@staff_required
@require_GET
def conversation_new(request: HttpRequest) -> HttpResponse:
    """`/c/new?q=...`: a new private chat whose composer holds `q`; nothing is stored by this
    request. The page sends `q` itself, over its WebSocket, once loaded, only when the link
    was followed from this site or a listed origin (`question_link_trusted`); otherwise the
    question waits in the composer with a notice (docs/decisions/0125-a-question-in-a-link.md).
    Without `q`, the new chat; a `q` longer than CHAT_MAX_MESSAGE_CHARS is put in the
    composer, cut to that length, unsent, with a notice saying so."""
    question = request.GET.get("q", "").strip()
    if not question:
        return new_chat_page(request)
    limit = settings.CHAT_MAX_MESSAGE_CHARS
    if len(question) > limit:
        notice = (
            f"The question in the link is longer than {limit} characters: "
            "it was cut and not sent. Shorten it, then send it."
        )
        return new_chat_page(request, prefill=question[:limit], notice=notice, private=True)
    if not question_link_trusted(request):
        notice = (
            "This question comes from a link on another site and was not sent. "
            "Read it, then send it if you mean to ask it."
        )
        return new_chat_page(request, prefill=question, notice=notice, private=True)
    return new_chat_page(request, prefill=question, autosend=True, private=True)


@staff_required
@require_GET
def document_options(request: HttpRequest) -> HttpResponse:
    """The settings dialog's checkbox per document the user may search (fetched when it is
    opened)."""
    reader = reader_for(request.user)
    documents = list(searchable_documents(reader=reader).values_list("pk", "title"))
    return HttpResponse(document_options_html(documents), content_type="text/html; charset=utf-8")


def conversation_page(
    request: HttpRequest, context: dict, *, messages_html: bytes = b""
) -> HttpResponse:
    """The chat page; its long parts (messages, the documents of the settings dialog) are
    rendered apart and spliced in (see `page_with_parts`). Whether the answers show their
    citation markers is the user's stored preference (accounts.selectors.preferences_of)."""
    context["show_citations"] = preferences_of(user=request.user).show_citations
    parts = {"messages_html": messages_html}
    return page_with_parts(request, "chat/conversation.html", context, parts)


@staff_required
def conversation(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    try:
        found = conversation_get_for(request.user, conversation_id)
    except AnswerError:
        return conversation_not_found(request)
    can_post = conversation_access(request.user, found) == ConversationAccess.OWNER
    answers_release_stale(conversation=found)
    reader = reader_for(request.user)
    messages = conversation_transcript(found, user=reader)
    last_question = next((m.content for m in reversed(messages) if m.role == Message.Role.USER), "")
    context = {
        "conversation": found,
        "conversation_id": str(found.pk),
        "ws_url": f"/ws/chat/{found.pk}/",
        "can_post": can_post,
        "autofocus": True,
        **composer_context(request.user, is_new=not messages, last_question=last_question),
        **sidebar_context(request.user, active_id=str(found.pk)),
        # The owner's files attached here (a query only for someone who has files).
        "attachments": (
            conversation_attachments(found, user=request.user)
            if can_post and reader.own_file_ids
            else []
        ),
    }
    html = transcript_html(messages, conversation_id=found.pk, user=request.user, can_post=can_post)
    return conversation_page(request, context, messages_html=html)


@staff_required
@require_POST
def conversation_delete_view(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    try:
        found = conversation_get_for(request.user, conversation_id)
    except AnswerError:
        return conversation_not_found(request)
    try:
        conversation_delete(conversation=found, user=request.user)
    except AnswerError as error:
        return no_access(request, reason=error.message, status=error.status)
    next_url = request.POST.get("next", "")
    deleted_path = reverse("chat:conversation", kwargs={"conversation_id": conversation_id})
    if (
        next_url
        and not next_url.startswith(deleted_path)
        and url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()})
    ):
        return redirect(next_url)
    return redirect("chat:home")


@staff_required
@require_POST
def conversation_clear_view(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """The owner clears the conversation's messages (`conversation_clear`), then sees it empty."""
    try:
        found = conversation_get_for(request.user, conversation_id)
    except AnswerError:
        return conversation_not_found(request)
    try:
        conversation_clear(conversation=found, user=request.user)
    except AnswerError as error:
        return no_access(request, reason=error.message, status=error.status)
    url = reverse("chat:conversation", kwargs={"conversation_id": found.pk})
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


def page_conversation_id(request: HttpRequest) -> str:
    """The id of the conversation shown by the page an htmx request comes from ("" when that
    page shows none): its header and sidebar item are the ones to update."""
    path = request.htmx.current_url_abs_path if request.htmx else None
    if not path:
        return ""
    try:
        match = resolve(urlsplit(path).path)
    except Resolver404:
        return ""
    if match.view_name != "chat:conversation":
        return ""
    return str(match.kwargs["conversation_id"])


def _owned(request: HttpRequest, conversation_id: uuid.UUID) -> Conversation | HttpResponse:
    """The conversation when the user may change it, else the page that says why."""
    try:
        found = conversation_get_for(request.user, conversation_id)
    except AnswerError:
        return conversation_not_found(request)
    try:
        conversation_check_owner(found, request.user)
    except AnswerError as error:
        return no_access(request, reason=error.message, status=error.status)
    return found


def _title_place(value: str) -> str:
    return "sidebar" if value == "sidebar" else "header"


def _title_editor(
    request: HttpRequest,
    conversation: Conversation,
    *,
    place: str,
    value: str,
    error: str = "",
    status: int = 200,
) -> HttpResponse:
    context = {
        "conversation": conversation,
        "place": place,
        "title_value": value,
        "title_max_chars": TITLE_MAX_CHARS,
        "error": error,
        "editor_oob": bool(error),
    }
    return render(request, "chat/layout.html#title-editor", context, status=status)


@staff_required
@require_GET
def conversation_title(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """A conversation's title in the page header (`?place=header`) or the sidebar
    (`?place=sidebar`): its editor with `edit`, else the title itself (the editor closed)."""
    found = _owned(request, conversation_id)
    if isinstance(found, HttpResponse):
        return found
    place = _title_place(request.GET.get("place", ""))
    if request.GET.get("edit"):
        return _title_editor(request, found, place=place, value=found.title)
    if place == "sidebar":
        active_id = page_conversation_id(request)
        return HttpResponse(sidebar_item_html(found, user=request.user, active_id=active_id))
    return HttpResponse(conversation_title_html(found, user=request.user, focus=True))


@staff_required
@require_POST
def conversation_rename_view(request: HttpRequest, conversation_id: uuid.UUID) -> HttpResponse:
    """Rename a conversation (owner only). Answers out of band: the new title in the page's
    header when the page shows this conversation, and the sidebar's list (renaming makes the
    conversation the most recent); or the editor again with a readable error (422)."""
    found = _owned(request, conversation_id)
    if isinstance(found, HttpResponse):
        return found
    place = _title_place(request.POST.get("place", ""))
    title = request.POST.get("title", "")
    try:
        renamed = conversation_rename(conversation=found, user=request.user, title=title)
    except AnswerError as error:
        return _title_editor(
            request, found, place=place, value=title, error=error.message, status=error.status
        )
    html = conversation_renamed_html(
        renamed, user=request.user, shown_id=page_conversation_id(request), place=place
    )
    return HttpResponse(html)


@staff_required
def history(request: HttpRequest) -> HttpResponse:
    query = query_clean(request.GET.get("q", ""))
    reader = reader_for(request.user)
    found = conversations_search(user=request.user, reader=reader, query=query)
    page_obj = Paginator(found, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
    page_obj.object_list = history_items(list(page_obj.object_list), reader=reader, query=query)
    context = {"page_obj": page_obj, "query": query, "nav": "history"}
    context.update(sidebar_context(request.user))
    return render(request, "chat/history.html", context)


@staff_required
@require_POST
def message_feedback(request: HttpRequest, message_id: uuid.UUID) -> HttpResponse:
    """Thumbs up / down on an answer, and the comment a thumbs down may carry; returns the
    rating buttons, pressed as chosen, with a comment box after a thumbs down given without
    one. A comment longer than FEEDBACK_COMMENT_MAX_CHARS is refused (422, the box again with
    the error and the text kept); the rating is then left unchanged."""
    try:
        message = message_get_for(request.user, message_id)
        rating = client_int(request.POST.get("rating", ""))
        if rating not in (Feedback.Rating.UP, Feedback.Rating.DOWN):
            raise ValueError(rating)
    except AnswerError as error:
        return HttpResponse(error.message, status=error.status, content_type="text/plain")
    except ValueError:
        return HttpResponse("The rating must be 1 or -1.", status=400, content_type="text/plain")
    comment = request.POST.get("comment")
    if comment is not None:
        comment = comment.strip()
    context = {"comment_max_chars": FEEDBACK_COMMENT_MAX_CHARS}
    if comment is not None and len(comment) > FEEDBACK_COMMENT_MAX_CHARS:
        view = message_views([message], user=request.user)[0]
        context.update(
            m=view,
            comment_open=True,
            comment=comment,
            comment_error=f"At most {FEEDBACK_COMMENT_MAX_CHARS} characters, please.",
        )
        return render(request, "chat/conversation.html#feedback", context, status=422)
    try:
        feedback_give(user=request.user, message=message, rating=rating, comment=comment or "")
    except AnswerError as error:
        return HttpResponse(error.message, status=error.status, content_type="text/plain")
    view = message_views([message], user=request.user)[0]
    context.update(
        m=view,
        feedback_saved=True,
        comment_open=rating == Feedback.Rating.DOWN and comment is None,
    )
    return render(request, "chat/conversation.html#feedback", context)
