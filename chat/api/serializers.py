"""Shapes of the API's requests and responses (also what the OpenAPI schema documents)."""

from __future__ import annotations

import uuid

from django.conf import settings
from rest_framework import serializers

from chat.api.errors import MALFORMED_UUID
from chat.selectors import ConversationAccess, conversation_access
from knowledge.retrieval import MODES, TOP_K_DEFAULT, TOP_K_MAX, TOP_K_MIN


class ClientUUIDField(serializers.UUIDField):
    """A UUID whose malformed value is a 400 bad-request (not a 422)."""

    def to_internal_value(self, data):
        try:
            return uuid.UUID(str(data)) if not isinstance(data, uuid.UUID) else data
        except (TypeError, ValueError, AttributeError):
            raise serializers.ValidationError(
                "Must be a valid UUID.", code=MALFORMED_UUID
            ) from None


# --- Errors --------------------------------------------------------------------------------------
class ErrorBodySerializer(serializers.Serializer):
    code = serializers.ChoiceField(
        choices=[
            "bad-request",
            "unauthorized",
            "forbidden",
            "not-found",
            "method-not-allowed",
            "conflict",
            "validation-failed",
            "rate-limited",
            "internal",
            "upstream-unavailable",
        ]  # fmt: skip
    )
    message = serializers.CharField(help_text="Safe to show to the user.")
    details = serializers.DictField(
        help_text="More about the error; for validation-failed, the messages of each field."
    )


class ErrorEnvelopeSerializer(serializers.Serializer):
    error = ErrorBodySerializer()


# --- Chat ----------------------------------------------------------------------------------------
class ChatRequestSerializer(serializers.Serializer):
    message = serializers.CharField(
        trim_whitespace=False,
        allow_blank=True,
        help_text=f"The question (control characters are removed; at most "
        f"{settings.CHAT_MAX_MESSAGE_CHARS} characters).",
    )
    message_id = ClientUUIDField(
        help_text="Client-generated id of the question: the idempotency key. Sending it again "
        "returns the stored answer instead of answering twice."
    )
    conversation_id = ClientUUIDField(
        required=False,
        allow_null=True,
        help_text="An existing conversation of yours, or the id to give a new one; omitted: "
        "a new conversation is created.",
    )
    is_private = serializers.BooleanField(
        default=False, help_text="Only when the conversation is created: visible to you only."
    )
    top_k = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=TOP_K_MIN,
        max_value=TOP_K_MAX,
        help_text="How many chunks to retrieve (default: the admin setting, 5).",
    )
    document_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        required=False,
        allow_null=True,
        max_length=200,
        help_text="Search only these documents.",
    )
    embedding = serializers.ListField(
        child=serializers.FloatField(),
        required=False,
        allow_null=True,
        min_length=384,
        max_length=384,
        help_text="The question's all-MiniLM-L6-v2 embedding (384 floats), used instead of "
        "embedding the message on the server.",
    )
    regenerate = serializers.BooleanField(
        default=False,
        help_text="Answer the stored question `message_id` again, replacing its answer.",
    )


class CitationSerializer(serializers.Serializer):
    n = serializers.IntegerField(help_text="The marker number: `[n]` in the answer text.")
    chunk_id = serializers.IntegerField(allow_null=True)
    document_id = serializers.IntegerField(allow_null=True)
    title = serializers.CharField()
    page = serializers.IntegerField(allow_null=True)
    section = serializers.CharField(allow_null=True)
    sheet = serializers.CharField(
        allow_null=True, help_text="Spreadsheets: the sheet of the cited rows (else null)."
    )
    cells = serializers.CharField(
        allow_null=True,
        help_text='Spreadsheets: the cited cells, e.g. "A4:E4" (shown as "file.xlsx — '
        'Sheet!A4:E4"); else null.',
    )
    url = serializers.CharField(help_text="Link to the source (may be empty).")
    excerpt = serializers.CharField(help_text="The first 200 characters of the cited chunk.")
    text = serializers.CharField(help_text="The cited chunk's full text, as it was cited.")
    similarity = serializers.FloatField(help_text="Cosine similarity to the question.")
    stale = serializers.BooleanField(
        help_text="The source changed since: the chunk was re-ingested, deleted or disabled."
    )


class RefusalSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["refusal"])
    conversation_id = serializers.UUIDField()
    message_id = serializers.UUIDField(help_text="The stored refusal (assistant message).")
    reply_to = serializers.UUIDField(help_text="The question's message_id.")
    message = serializers.CharField()
    suggestions = serializers.ListField(child=serializers.CharField())
    search_query = serializers.CharField(
        help_text="What was searched: the message, or a follow-up read in its conversation."
    )
    warning = serializers.CharField(allow_null=True)


# --- Conversations and messages ------------------------------------------------------------------
class OwnerSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    username = serializers.CharField()


class ConversationSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    is_private = serializers.BooleanField()
    owner = OwnerSerializer()
    is_owner = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def get_is_owner(self, conversation) -> bool:
        user = self.context["request"].user
        return conversation_access(user, conversation) == ConversationAccess.OWNER


class ConversationGroupsSerializer(serializers.Serializer):
    shared = ConversationSerializer(many=True)
    private = ConversationSerializer(many=True)


class ConversationUpdateSerializer(serializers.Serializer):
    title = serializers.CharField(max_length=200, help_text="The new title.")


class MessageSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    role = serializers.CharField()
    content = serializers.CharField()
    status = serializers.CharField(help_text="complete / streaming / interrupted / refused / error")
    reply_to = serializers.UUIDField(source="reply_to_id", allow_null=True)
    mode = serializers.CharField()
    suggestions = serializers.ListField(child=serializers.CharField())
    warning = serializers.CharField()
    search_query = serializers.CharField(
        help_text="Answers: what retrieval searched for — the question as asked or, for a "
        'follow-up that leans on the conversation ("And in London?"), the question read with '
        "its context. Empty for questions, and for answers given before it was recorded."
    )
    created_at = serializers.DateTimeField()
    citations = serializers.SerializerMethodField()

    def get_citations(self, message) -> list[dict]:
        from chat.answering.citations import citation_as_dict
        from chat.selectors import MessageRow

        if isinstance(message, MessageRow):  # each citation row knows whether it is stale
            return [citation_as_dict(c, stale=c.stale) for c in message.citations]
        return [citation_as_dict(citation) for citation in message.citations.all()]


class MessageListSerializer(serializers.Serializer):
    conversation = ConversationSerializer()
    messages = MessageSerializer(many=True)


class FeedbackInputSerializer(serializers.Serializer):
    rating = serializers.ChoiceField(choices=["up", "down"])
    comment = serializers.CharField(required=False, allow_blank=True, max_length=2000)


class FeedbackSerializer(serializers.Serializer):
    message_id = serializers.UUIDField()
    rating = serializers.ChoiceField(choices=["up", "down"])
    comment = serializers.CharField()
    updated_at = serializers.DateTimeField()


# --- Knowledge -----------------------------------------------------------------------------------
class DocumentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    source = serializers.CharField(help_text="The original's file name, or its URL.")
    media_type = serializers.CharField()
    status = serializers.CharField(help_text="pending / processing / ready / failed")
    reprocessing = serializers.BooleanField(
        help_text="A new version is being processed; the ready one stays searchable meanwhile."
    )
    error = serializers.CharField(
        help_text="Why processing failed (in full for staff who manage documents)."
    )
    enabled = serializers.BooleanField()
    expires_at = serializers.DateTimeField(
        allow_null=True, help_text="When the document stops being cited (null: never)."
    )
    expired = serializers.BooleanField(
        source="is_expired", help_text="Expired: never cited, deleted by purge_expired."
    )
    chunk_count = serializers.IntegerField()
    url = serializers.CharField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class DocumentListSerializer(serializers.Serializer):
    documents = DocumentSerializer(many=True)


class SearchInputSerializer(serializers.Serializer):
    q = serializers.CharField(help_text="The query.")
    mode = serializers.ChoiceField(choices=list(MODES), default="hybrid")
    top_k = serializers.IntegerField(
        min_value=TOP_K_MIN, max_value=TOP_K_MAX, default=TOP_K_DEFAULT
    )


class SearchHitSerializer(serializers.Serializer):
    chunk_id = serializers.IntegerField()
    document_id = serializers.IntegerField()
    document_title = serializers.CharField()
    document_url = serializers.CharField()
    chunk_index = serializers.IntegerField()
    page = serializers.IntegerField(allow_null=True)
    section = serializers.CharField(allow_null=True)
    sheet = serializers.CharField(allow_null=True)
    cells = serializers.CharField(allow_null=True)
    excerpt = serializers.CharField()
    text = serializers.CharField()
    similarity = serializers.FloatField(allow_null=True)
    score = serializers.FloatField(help_text="Reciprocal-rank-fusion score.")


class SearchResultSerializer(serializers.Serializer):
    query = serializers.CharField()
    mode = serializers.CharField()
    top_k = serializers.IntegerField()
    truncated = serializers.BooleanField(help_text="The query was cut to fit the model.")
    results = SearchHitSerializer(many=True)
