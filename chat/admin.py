"""The chat side of the admin (docs/product.md §9): answering settings, conversations and
messages (read only), feedback review and the unanswered questions report.

Privacy policy: the content of a private conversation (its messages, the feedback on them,
its refused questions) is shown in the admin to superusers only; other staff with admin
access see what the chat shows them, shared conversations and their own private ones
(`chat.selectors.conversations_admin_filter`). Nor is it a way around a collection's readers:
an answer withheld from them in the chat is absent from their admin too
(`chat.selectors.messages_admin_filter`, docs/decisions/0080-withheld-answers.md)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin, messages
from django.db.models import Count, Exists, OuterRef, Prefetch, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from chat.answering.generative import LanguageModelState, language_model_state
from chat.calibration import CALIBRATION_USE, calibration_current, calibration_is_current
from chat.models import (
    ChatSettings,
    Citation,
    Conversation,
    EvidenceCalibration,
    Feedback,
    Message,
)
from chat.selectors import conversations_admin_filter, messages_admin_filter
from chat.unanswered import unanswered_groups


def _excerpt(text: str, words: int = 24) -> str:
    return Truncator(" ".join((text or "").split())).words(words)


def _sources_html(message: Message) -> str:
    citations = list(message.citations.all())
    if not citations:
        return "—"
    return format_html(
        "<ol style='margin:0;padding-left:1.2em'>{}</ol>",
        format_html_join(
            "",
            "<li>[{}] {}{}</li>",
            ((c.n, c.document_title, f" — page {c.page}" if c.page else "") for c in citations),
        ),
    )


class ReadOnlyAdminMixin:
    """Conversations and messages are what users said: the admin reads them, never edits."""

    def has_add_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False


# --- Settings -------------------------------------------------------------------------------
@admin.register(ChatSettings)
class ChatSettingsAdmin(admin.ModelAdmin):
    """A single row: the list page opens it directly."""

    radio_fields = {"generation_mode": admin.HORIZONTAL}
    fields = (
        "generation_mode",
        "language_model",
        "evidence_threshold",
        "evidence_threshold_automatic",
        "automatic_calibration",
        "default_top_k",
        "max_history_turns",
        "updated_at",
    )
    readonly_fields = ("language_model", "automatic_calibration", "updated_at")

    @admin.display(description="Automatic calibration")
    def automatic_calibration(self, obj: ChatSettings) -> str:
        """The knowledge base's own thresholds (chat/calibration.py), beside the admin's."""
        return calibration_html(calibration_current())

    @admin.display(description="Language model")
    def language_model(self, obj: ChatSettings) -> str:
        """Whether the generative mode has a model to use (configured, reachable), the last
        error and the circuit breaker; a warning when generative is chosen without one."""
        return language_model_html(language_model_state(), obj.generation_mode)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context=None) -> HttpResponse:
        chat_settings, _ = ChatSettings.objects.get_or_create(pk=1)
        return HttpResponseRedirect(
            reverse("admin:chat_chatsettings_change", args=[chat_settings.pk])
        )

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = extra_context or {}
        override = settings.CHAT_EVIDENCE_THRESHOLD
        if override not in (None, ""):
            extra_context["subtitle"] = (
                f"The CHAT_EVIDENCE_THRESHOLD environment variable ({override}) overrides the "
                "evidence threshold set here."
            )
        return super().change_view(request, object_id, form_url, extra_context)

    def save_model(self, request: HttpRequest, obj: ChatSettings, form, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if obj.generation_mode == ChatSettings.Mode.GENERATIVE:
            state = language_model_state(check=False)
            if not state.status.configured:
                self.message_user(
                    request,
                    "Generative mode is on, but no language model is configured "
                    f"({state.status.detail}): answers stay extractive, with a notice.",
                    level=messages.WARNING,
                )

    def response_change(self, request: HttpRequest, obj: ChatSettings) -> HttpResponse:
        # Saving returns to the same form (there is no list to go back to).
        self.message_user(request, "Chat settings saved.")
        return HttpResponseRedirect(request.path)


def calibration_html(calibration: EvidenceCalibration | None) -> str:
    if calibration is None:
        return format_html(
            "{}",
            "Not measured yet: the knowledge base is measured in the background after documents "
            "are added, re-processed, enabled, disabled or deleted.",
        )
    stale = "" if calibration_is_current(calibration) else " (the knowledge base has changed "
    if stale:
        stale += "since; a new measurement is queued)"
    rows = [
        format_html(
            "Automatic threshold: <strong>{}</strong>, measured {}{}",
            f"{calibration.threshold:.3f}",
            calibration.computed_at.strftime("%Y-%m-%d %H:%M UTC"),
            stale,
        ),
        format_html(
            "Noise floor (95th percentile of {} generic questions): {}",
            calibration.negatives,
            f"{calibration.noise_floor:.3f}",
        ),
        format_html(
            "Probe floor (5th percentile of {} questions made from its own sentences): {}",
            calibration.positives,
            "-" if calibration.probe_floor is None else f"{calibration.probe_floor:.3f}",
        ),
        format_html("{}", CALIBRATION_USE),
    ]
    return format_html_join("", "<div>{}</div>", ((row,) for row in rows))


def language_model_html(state: LanguageModelState, generation_mode: str) -> str:
    status = state.status
    rows = [format_html("Backend: <code>{}</code>", status.backend or "?")]
    if not status.configured:
        rows.append(format_html("<strong>Not configured.</strong> {}", status.detail))
    else:
        rows.append(format_html("Model: <code>{}</code>", status.model))
        if status.reachable:
            rows.append(format_html("{}", "Reachable."))
        elif status.reachable is False:
            rows.append(format_html("<strong>Not reachable:</strong> {}", status.detail))
    if state.circuit_open:
        rows.append(
            format_html(
                "<strong>{}</strong>",
                "Circuit open: after repeated failures the model is skipped for a while and "
                "answers are extractive.",
            )
        )
    if state.last_error is not None:
        rows.append(
            format_html("Last error: {} ({})", state.last_error.message, state.last_error.at)
        )
    html = format_html_join("", "<div>{}</div>", ((row,) for row in rows))
    if generation_mode == ChatSettings.Mode.GENERATIVE and not status.configured:
        html = format_html(
            '<p class="errornote">{}</p>{}',
            "Generative mode is chosen but no language model is configured: answers stay "
            "extractive and say so.",
            html,
        )
    return html


# --- Conversations and messages -------------------------------------------------------------
class MessageInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Message
    fk_name = "conversation"
    fields = ("created_at", "role", "status", "text")
    readonly_fields = fields
    extra = 0
    show_change_link = True
    ordering = ("created_at",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        return super().get_queryset(request).filter(messages_admin_filter(request.user))

    @admin.display(description="Text")
    def text(self, obj: Message) -> str:
        return _excerpt(obj.content, 60)


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("title", "owner", "is_private", "message_count", "updated_at")
    list_filter = ("is_private", "created_at")
    search_fields = ("title", "owner__username", "messages__content")  # see get_search_results
    date_hierarchy = "updated_at"
    readonly_fields = ("id", "title", "owner", "is_private", "created_at", "updated_at")
    inlines = [MessageInline]
    list_select_related = ("owner",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        return (
            super()
            .get_queryset(request)
            .filter(conversations_admin_filter(request.user))
            .annotate(message_count=Count("messages"))
        )

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Conversation], search_term: str
    ) -> tuple[QuerySet[Conversation], bool]:
        """Conversations whose title, owner's username or a message the user may read
        (`messages_admin_filter`) contains `search_term`."""
        term = search_term.strip()
        if not term:
            return queryset, False
        readable = Message.objects.filter(
            messages_admin_filter(request.user), conversation_id=OuterRef("pk")
        )
        matching = (
            Q(title__icontains=term)
            | Q(owner__username__icontains=term)
            | Exists(readable.filter(content__icontains=term))
        )
        return queryset.filter(matching), False

    @admin.display(description="Messages", ordering="message_count")
    def message_count(self, obj: Conversation) -> int:
        return obj.message_count


class CitationInline(ReadOnlyAdminMixin, admin.TabularInline):
    model = Citation
    fields = ("n", "document_title", "page", "section", "similarity", "excerpt")
    readonly_fields = fields
    extra = 0
    can_delete = False

    @admin.display(description="Passage")
    def excerpt(self, obj: Citation) -> str:
        return _excerpt(obj.text, 30)


@admin.register(Message)
class MessageAdmin(ReadOnlyAdminMixin, admin.ModelAdmin):
    list_display = ("short_content", "role", "status", "conversation", "created_at")
    list_filter = ("role", "status", "mode", "created_at")
    search_fields = ("content", "conversation__title")
    date_hierarchy = "created_at"
    list_select_related = ("conversation",)
    readonly_fields = (
        "id",
        "conversation",
        "role",
        "status",
        "content",
        "reply_to",
        "mode",
        "suggestions",
        "warning",
        "error_code",
        "top_k",
        "best_similarity",
        "retrieval_ms",
        "first_event_ms",
        "total_ms",
        "created_at",
    )
    exclude = ("source_chunks",)
    inlines = [CitationInline]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Message]:
        return super().get_queryset(request).filter(messages_admin_filter(request.user))

    @admin.display(description="Message")
    def short_content(self, obj: Message) -> str:
        return _excerpt(obj.content, 16) or "(empty)"

    def get_urls(self):
        urls = [
            path(
                "unanswered/",
                self.admin_site.admin_view(self.unanswered_view),
                name="chat_message_unanswered",
            )
        ]
        return urls + super().get_urls()

    def unanswered_view(self, request: HttpRequest) -> HttpResponse:
        """Refused questions, near-duplicates grouped with a count, newest first."""
        if not self.has_view_permission(request):
            from django.core.exceptions import PermissionDenied

            raise PermissionDenied
        context = {
            **self.admin_site.each_context(request),
            "title": "Unanswered questions",
            "subtitle": None,
            "groups": unanswered_groups(
                visible=conversations_admin_filter(request.user, prefix="conversation__")
            ),
            "opts": self.model._meta,
        }
        return TemplateResponse(request, "admin/chat/unanswered.html", context)


# --- Feedback -------------------------------------------------------------------------------
class RatingFilter(admin.SimpleListFilter):
    """Thumbs-down answers first: they are what needs reviewing."""

    title = "rating"
    parameter_name = "rating"

    def lookups(self, request, model_admin):
        return [("down", "Thumbs down"), ("up", "Thumbs up"), ("all", "All")]

    def value(self):
        return super().value() or "down"

    def choices(self, changelist):
        for lookup, title in self.lookup_choices:
            yield {
                "selected": self.value() == lookup,
                "query_string": changelist.get_query_string({self.parameter_name: lookup}),
                "display": title,
            }

    def queryset(self, request, queryset):
        value = self.value()
        if value == "down":
            return queryset.filter(rating=Feedback.Rating.DOWN)
        if value == "up":
            return queryset.filter(rating=Feedback.Rating.UP)
        return queryset


SUPERSEDED_LABEL = "[replaced]"
SUPERSEDED = (
    "The asker had this answer generated again; it is no longer shown in the conversation "
    "and the feedback stays attached to it."
)


def _superseded(obj: Feedback) -> bool:
    return obj.message.role == Message.Role.SUPERSEDED


class SupersededFilter(admin.SimpleListFilter):
    title = "answer"
    parameter_name = "answer"

    def lookups(self, request: HttpRequest, model_admin) -> list[tuple[str, str]]:
        return [("current", "Shown in its conversation"), ("replaced", "Replaced")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Feedback]) -> QuerySet[Feedback]:
        if self.value() == "current":
            return queryset.exclude(message__role=Message.Role.SUPERSEDED)
        if self.value() == "replaced":
            return queryset.filter(message__role=Message.Role.SUPERSEDED)
        return queryset


@admin.register(Feedback)
class FeedbackAdmin(admin.ModelAdmin):
    list_display = (
        "rating_display",
        "question",
        "answer",
        "comment_excerpt",
        "sources",
        "user",
        "created_at",
    )
    list_filter = (RatingFilter, SupersededFilter, "created_at")
    search_fields = ("message__content", "message__reply_to__content", "comment")
    date_hierarchy = "created_at"
    readonly_fields = (
        "user",
        "rating_display",
        "question",
        "answer_full",
        "sources",
        "comment",
        "conversation_link",
        "created_at",
    )
    fields = readonly_fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[Feedback]:
        citations = Citation.objects.order_by("n")
        visible = messages_admin_filter(request.user, prefix="message__")
        return (
            super()
            .get_queryset(request)
            .filter(visible)
            .select_related("user", "message__reply_to", "message__conversation")
            .prefetch_related(Prefetch("message__citations", queryset=citations))
        )

    @admin.display(description="Rating", ordering="rating")
    def rating_display(self, obj: Feedback) -> str:
        return "👍 Helpful" if obj.rating == Feedback.Rating.UP else "👎 Unhelpful"

    @admin.display(description="Question")
    def question(self, obj: Feedback) -> str:
        reply_to = obj.message.reply_to
        return _excerpt(reply_to.content, 30) if reply_to else "—"

    @admin.display(description="Answer")
    def answer(self, obj: Feedback) -> str:
        excerpt = _excerpt(obj.message.content, 30)
        return f"{SUPERSEDED_LABEL} {excerpt}" if _superseded(obj) else excerpt

    @admin.display(description="Answer")
    def answer_full(self, obj: Feedback) -> str:
        body = format_html(
            "<div style='white-space:pre-wrap;max-width:60em'>{}</div>", obj.message.content
        )
        if not _superseded(obj):
            return body
        return format_html("<p><strong>{}</strong> {}</p>{}", SUPERSEDED_LABEL, SUPERSEDED, body)

    @admin.display(description="Comment")
    def comment_excerpt(self, obj: Feedback) -> str:
        return _excerpt(obj.comment, 30) if obj.comment else "—"

    @admin.display(description="Sources")
    def sources(self, obj: Feedback) -> str:
        return _sources_html(obj.message)

    @admin.display(description="Conversation")
    def conversation_link(self, obj: Feedback) -> str:
        conversation = obj.message.conversation
        url = reverse("admin:chat_conversation_change", args=[conversation.pk])
        return format_html('<a href="{}">{}</a>', url, conversation.title)
