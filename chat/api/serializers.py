"""Shapes of the API's requests and responses (also what the OpenAPI schema documents)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from chat.api.errors import CODE_OF_STATUS, MALFORMED_UUID
from chat.errors import AnswerError
from chat.history import PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX, ConversationCursor, CursorInvalid
from chat.ids import uuid_parse
from chat.selectors import ConversationAccess, conversation_access
from chat.services import TITLE_MAX_CHARS
from knowledge.retrieval import MODES, TOP_K_DEFAULT, TOP_K_MAX, TOP_K_MIN
from pages.client_input import BIGINT_MAX, client_int

EMBEDDING_DIMENSIONS = 384


# What the server checks, in the schema: 384 numbers, not all zero (a vector without a
# direction matches nothing: 422).
@extend_schema_field(
    {
        "type": "array",
        "items": {"type": "number", "format": "double"},
        "minItems": EMBEDDING_DIMENSIONS,
        "maxItems": EMBEDDING_DIMENSIONS,
        "not": {"items": {"type": "number", "enum": [0]}},
    }
)
class EmbeddingField(serializers.ListField):
    """A question's embedding: a list of floats (its length and values checked by the
    answering core)."""


class ClientUUIDField(serializers.UUIDField):
    """A UUID whose malformed value is a 400 bad-request (not a 422)."""

    def to_internal_value(self, data):
        try:
            return uuid_parse(data, self.field_name)
        except AnswerError:
            raise serializers.ValidationError(
                "Must be a valid UUID.", code=MALFORMED_UUID
            ) from None


class EmptyIsPresent:
    """A field mixin: an empty value sent for the field (`?limit=`, an empty form part) is that
    value, to be validated, not taken as omitted (DRF's default for form data)."""

    def get_value(self, dictionary: Any) -> Any:
        if self.field_name in dictionary and dictionary.get(self.field_name) == "":
            return ""
        return super().get_value(dictionary)


class PresentUUIDField(EmptyIsPresent, ClientUUIDField):
    """A `ClientUUIDField` of a form that, when present, must be a UUID."""


# What the server reads as text with something in it (chat.answering.questions.text_clean drops
# control and surrogate characters, then the text is trimmed of white space): at least one
# character that is none of those, and DRF refuses NUL anywhere. The class is exactly that set in
# the Basic Multilingual Plane, and every character above it counts (`[^\x00-\uffff]`: none is
# white space, a control or a surrogate); tests/chat/api/test_text_pattern.py checks the pattern
# against the server's rule. In the syntax Python, Rust's regex (jsonschema-rs, which
# schemathesis checks with) and ECMAScript share; why this form:
# docs/decisions/0105-schema-valid-requests-accepted.md, "Later". For the schema only: the
# server's own checks give the readable messages.
_TEXT_CHAR = (
    r"(?:[!-~\u00a1-\u167f\u1681-\u1fff\u200b-\u2027\u202a-\u202e\u2030-\u205e\u2060-\u2fff"
    r"\u3001-\ud7ff\ue000-\uffff]|[^\x00-\uffff])"
)
TEXT_PATTERN = rf"^[^\x00]*{_TEXT_CHAR}[^\x00]*$"


def text_schema(max_length: int) -> dict:
    """The OpenAPI schema of a question-like string: not blank once cleaned, at most
    `max_length` characters."""
    return {"type": "string", "minLength": 1, "maxLength": max_length, "pattern": TEXT_PATTERN}


# --- Errors --------------------------------------------------------------------------------------
class ErrorBodySerializer(serializers.Serializer):
    code = serializers.ChoiceField(choices=sorted(set(CODE_OF_STATUS.values())))
    message = serializers.CharField(help_text="Safe to show to the user.")
    details = serializers.DictField(
        help_text="More about the error; for validation-failed, the messages of each field."
    )


class ErrorEnvelopeSerializer(serializers.Serializer):
    error = ErrorBodySerializer()


# --- Chat ----------------------------------------------------------------------------------------
class StrictCharField(serializers.CharField):
    """A string that must be sent as a string: DRF's CharField would take `0` or `true` and store
    "0" / "True", which the schema (type: string) does not allow."""

    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """A boolean that must be sent as one: DRF's BooleanField would take `0`, `"yes"` or
    `"true"`, which the schema (type: boolean) does not allow."""

    default_error_messages = {"invalid": "Must be true or false."}

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


class StrictFloatField(serializers.FloatField):
    """A number that must be sent as one: DRF's FloatField would take `"0.5"` or `true`, which
    the schema (type: number) does not allow."""

    default_error_messages = {"invalid": "Must be a number."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field(text_schema(settings.CHAT_MAX_MESSAGE_CHARS))
class QuestionField(StrictCharField):
    """A question or query: checked by the answering core (422 when it is empty once cleaned or
    too long), documented as such."""

    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("error_messages", {"blank": "The message is empty."})
        kwargs.setdefault("max_length", settings.CHAT_MAX_MESSAGE_CHARS)
        super().__init__(**kwargs)


@extend_schema_field(text_schema(TITLE_MAX_CHARS))
class TitleField(StrictCharField):
    """A conversation title: checked by `conversation_rename` (422 when it is empty once cleaned
    or too long), documented as such."""


class ClientIntegerField(serializers.IntegerField):
    """An integer read by `pages.client_input.client_int` (ASCII digits or a JSON integer,
    bigint-sized) before DRF's bounds apply: a Unicode digit ("²", "١") or an enormous number
    is this field's "invalid" error, never a 500 further on."""

    def to_internal_value(self, data: object) -> int:
        try:
            return client_int(data)
        except ValueError:
            self.fail("invalid")


class PresentIntegerField(EmptyIsPresent, ClientIntegerField):
    """A `ClientIntegerField` for a query parameter that, when present, must be an integer."""


class OptionIntegerField(ClientIntegerField):
    """An integer option whose range is documented in the schema but checked by the answering
    core (`answer_stream` validates every option), once for both transports: this field
    checks only that it is an integer."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        bounds = (MinValueValidator, MaxValueValidator)
        self.validators = [v for v in self.validators if not isinstance(v, bounds)]


class ChatRequestSerializer(serializers.Serializer):
    # The transport checks the shape (a non-empty string without NUL); the answering core
    # (`question_normalize`) cleans the text and checks it is not empty and within the bound.
    message = QuestionField(
        trim_whitespace=False,
        max_length=None,
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
    is_private = StrictBooleanField(
        default=False, help_text="Only when the conversation is created: visible to you only."
    )
    top_k = OptionIntegerField(
        required=False,
        allow_null=True,
        min_value=TOP_K_MIN,
        max_value=TOP_K_MAX,
        help_text="How many chunks to retrieve (default: the admin setting, 5).",
    )
    document_ids = serializers.ListField(
        child=OptionIntegerField(min_value=1, max_value=BIGINT_MAX),
        required=False,
        allow_null=True,
        max_length=200,
        help_text="Search only these documents (ids of `GET /api/documents`; an id naming no "
        "document you may read is refused with 404).",
    )
    file_ids = serializers.ListField(
        child=OptionIntegerField(min_value=1, max_value=BIGINT_MAX),
        required=False,
        allow_null=True,
        max_length=20,
        help_text="Attach these personal files (ids of `POST /api/files`) to the conversation "
        "before answering: its answers then search them too, for you only. An id that is not "
        "one of your files is refused with 404.",
    )
    embedding = EmbeddingField(
        child=StrictFloatField(),
        required=False,
        allow_null=True,
        min_length=384,
        max_length=384,
        help_text="The question's all-MiniLM-L6-v2 embedding (384 floats, not all zero: 422), "
        "used instead of embedding the message on the server.",
    )
    regenerate = StrictBooleanField(
        default=False,
        help_text="Answer the stored question `message_id` again, replacing its answer.",
    )
    stream = StrictBooleanField(
        default=True,
        help_text='false: the answer comes as one JSON body (`type: "answer"`: the text, its '
        "citations and the ids) once it is complete, instead of Server-Sent Events.",
    )


class CitationSerializer(serializers.Serializer):
    n = serializers.IntegerField(help_text="The marker number: `[n]` in the answer text.")
    chunk_id = serializers.IntegerField(allow_null=True)
    chunk_index = serializers.IntegerField(
        allow_null=True,
        help_text="The cited chunk's position in its document (0 for the first), as it was "
        "cited; null for citations stored before it was recorded.",
    )
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
    ocr_confidence = serializers.FloatField(
        allow_null=True,
        help_text="Read by OCR from a scanned page: the mean confidence of its words (0-100), "
        "shown as a scanned page; null for text the document held as text.",
    )
    url = serializers.CharField(help_text="Link to the source (may be empty).")
    excerpt = serializers.CharField(help_text="The first 200 characters of the cited chunk.")
    text = serializers.CharField(help_text="The cited chunk's full text, as it was cited.")
    similarity = serializers.FloatField(help_text="Cosine similarity to the question.")
    stale = serializers.BooleanField(
        help_text="The source changed since: the chunk was re-ingested, deleted or disabled."
    )


class SearchedDocumentSerializer(serializers.Serializer):
    id = serializers.IntegerField(help_text="The document's id.")
    title = serializers.CharField(help_text="Its title when the answer was given.")


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
class OneShotAnswerSerializer(serializers.Serializer):
    """`POST /api/chat` with `stream: false`: the whole answer (`chat.api.one_shot`)."""

    type = serializers.ChoiceField(choices=["answer"])
    conversation_id = serializers.UUIDField()
    message_id = serializers.UUIDField(help_text="The stored answer (assistant message).")
    reply_to = serializers.UUIDField(help_text="The question's message_id.")
    title = serializers.CharField(help_text="The conversation's title.")
    is_private = serializers.BooleanField()
    search_query = serializers.CharField(
        help_text="What was searched: the message, or a follow-up read in its conversation."
    )
    content = serializers.CharField(help_text="The answer's text; `[n]` cites citation n.")
    status = serializers.CharField(help_text="complete")
    evidence = serializers.CharField(help_text='"strong", or "weak" (show it with a notice).')
    citations = CitationSerializer(many=True)
    searched_document = SearchedDocumentSerializer(allow_null=True)
    searched_documents = SearchedDocumentSerializer(
        many=True,
        help_text="Every document the question named and the answer was searched in "
        "(`searched_document` is the first); empty when none.",
    )
    warning = serializers.CharField(
        allow_null=True, help_text="The stream's `warning` events' messages, else null."
    )


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
    next_cursor = serializers.CharField(
        allow_null=True,
        help_text="Pass it as `cursor` to get the next page; null on the last page.",
    )


class ConversationListInputSerializer(serializers.Serializer):
    q = serializers.CharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        help_text="Only titles containing this.",
    )
    limit = PresentIntegerField(
        required=False,
        min_value=1,
        max_value=PAGE_SIZE_MAX,
        default=PAGE_SIZE_DEFAULT,
        help_text=f"Conversations per page, shared and private together (1 to {PAGE_SIZE_MAX}, "
        f"default {PAGE_SIZE_DEFAULT}).",
    )
    cursor = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="The `next_cursor` of the previous page; omitted: the first page.",
    )

    def validate_cursor(self, value: str) -> ConversationCursor | None:
        if not value:
            return None
        try:
            return ConversationCursor.decode(value)
        except CursorInvalid as error:
            raise serializers.ValidationError(str(error)) from None


class ConversationUpdateSerializer(serializers.Serializer):
    title = TitleField(max_length=TITLE_MAX_CHARS, help_text="The new title.")


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
    searched_document = serializers.SerializerMethodField(
        help_text='Answers whose question named a document the reader may read ("In the staff '
        'handbook, …"), found in that document alone: `{id, title}`. Null otherwise.'
    )
    searched_documents = serializers.SerializerMethodField(
        help_text="Answers: every document the question named and the answer was searched in "
        '("Compare inventory.xlsx and suppliers.csv": both), `searched_document` first. '
        "Empty otherwise."
    )
    evidence = serializers.CharField(
        help_text='Answers: "weak" when the documents may not answer the question directly '
        '(the answer is shown with a notice), "strong" otherwise. Empty for questions, '
        "refusals and answers given before it was recorded."
    )
    created_at = serializers.DateTimeField()
    citations = serializers.SerializerMethodField()
    withheld = serializers.CharField(
        default="",
        help_text='Answers citing a document the reader may not read: "access" (a collection '
        'they may not read) or "withdrawn" (a disabled, expired or deleted document); the '
        "content is then the notice, with no citations. Empty otherwise.",
    )

    @extend_schema_field(SearchedDocumentSerializer(allow_null=True))
    def get_searched_document(self, message) -> dict | None:
        from chat.answering.named_documents import searched_document_of

        return searched_document_of(message.searched_document_id, message.searched_document_title)

    @extend_schema_field(SearchedDocumentSerializer(many=True))
    def get_searched_documents(self, message) -> list[dict]:
        from chat.answering.named_documents import searched_documents_of

        return searched_documents_of(
            message.searched_document_id,
            message.searched_document_title,
            message.searched_documents,
        )

    def get_citations(self, message) -> list[dict]:
        from chat.citations import citation_as_dict
        from chat.transcript import MessageRow

        if isinstance(message, MessageRow):  # each citation row knows whether it is stale
            return [citation_as_dict(c, stale=c.stale) for c in message.citations]
        return [citation_as_dict(citation) for citation in message.citations.all()]


class MessageListSerializer(serializers.Serializer):
    conversation = ConversationSerializer()
    messages = MessageSerializer(many=True)


class FeedbackInputSerializer(serializers.Serializer):
    rating = serializers.ChoiceField(choices=["up", "down"])
    comment = StrictCharField(required=False, allow_blank=True, max_length=2000)


class FeedbackSerializer(serializers.Serializer):
    message_id = serializers.UUIDField()
    rating = serializers.ChoiceField(choices=["up", "down"])
    comment = serializers.CharField()
    updated_at = serializers.DateTimeField()


# --- Knowledge -----------------------------------------------------------------------------------
class DocumentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    collection = serializers.CharField(help_text="The name of the collection it belongs to.")
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


# A search query travels in the URL, and daphne (Twisted) drops a request whose first line and
# headers pass 16 KiB: 1,000 characters, even as 12 bytes each (%XX for 4 UTF-8 bytes), fit.
SEARCH_QUERY_MAX_CHARS = 1000


@extend_schema_field(text_schema(SEARCH_QUERY_MAX_CHARS))
class SearchQueryField(QuestionField):
    """The search query: at most SEARCH_QUERY_MAX_CHARS characters."""


class SearchInputSerializer(serializers.Serializer):
    q = SearchQueryField(
        max_length=SEARCH_QUERY_MAX_CHARS,
        error_messages={"blank": "The query is empty."},
        help_text="The query.",
    )
    mode = serializers.ChoiceField(choices=list(MODES), default="hybrid")
    top_k = ClientIntegerField(min_value=TOP_K_MIN, max_value=TOP_K_MAX, default=TOP_K_DEFAULT)


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
    score = serializers.FloatField(
        help_text="The score the chunk was ranked by: hybrid, cosine + 0.5 × the lexical score "
        "relative to the best lexical candidate's; vector, the cosine; lexical, the summed IDF "
        "of the question's terms the chunk holds."
    )


class SearchResultSerializer(serializers.Serializer):
    query = serializers.CharField()
    mode = serializers.CharField()
    top_k = serializers.IntegerField()
    truncated = serializers.BooleanField(help_text="The query was cut to fit the model.")
    results = SearchHitSerializer(many=True)
