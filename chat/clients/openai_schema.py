"""The OpenAPI description of the OpenAI-compatible API (/v1), in the same schema as /api/
(`/api/schema/`, `/api/docs/`): its async views are plain Django views drf-spectacular cannot
enumerate, so documented twins (never routed) are added by the preprocessing hook
`add_openai_endpoints`. The `sourced` extension field is described here."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.api.serializers import QuestionField
from chat.attachments import MAX_FILE_IDS
from chat.clients.openai_format import CONVERSATION_HEADER, MODEL_ID

MODELS_PATH = "/v1/models"
MODEL_PATH = "/v1/models/{model_id}"
COMPLETIONS_PATH = "/v1/chat/completions"


class OpenAiErrorDetailSerializer(serializers.Serializer):
    message = serializers.CharField()
    type = serializers.CharField(
        help_text="authentication_error (401), permission_error (403), not_found_error (404), "
        "invalid_request_error (400, 422), conflict_error (409), rate_limit_error (429), "
        "server_error (500), service_unavailable (503)."
    )
    code = serializers.CharField(help_text='Sourced\'s error code, e.g. "model_not_found".')
    param = serializers.CharField(allow_null=True, help_text="The request field at fault.")


class OpenAiErrorSerializer(serializers.Serializer):
    error = OpenAiErrorDetailSerializer()


class OpenAiModelSerializer(serializers.Serializer):
    id = serializers.CharField(help_text=f'"{MODEL_ID}": answers in the admin\'s answering mode.')
    object = serializers.CharField(default="model")
    created = serializers.IntegerField()
    owned_by = serializers.CharField()


class ModelListSerializer(serializers.Serializer):
    object = serializers.CharField(default="list")
    data = OpenAiModelSerializer(many=True)


class MessageInSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=["system", "developer", "user", "assistant", "tool"])
    content = QuestionField(
        help_text="Text (a list of parts, `{type: text, text}`, is read as their text)."
    )


class MetadataSerializer(serializers.Serializer):
    conversation_id = serializers.UUIDField(
        required=False,
        help_text="Continue this conversation of yours (or start it with this id). Also the "
        f"{CONVERSATION_HEADER} header.",
    )
    message_id = serializers.CharField(
        required=False,
        help_text="Idempotency key of the question: the same key again replays the stored "
        "answer. Also the Idempotency-Key header.",
    )


class CompletionRequestSerializer(serializers.Serializer):
    model = serializers.ChoiceField(choices=[MODEL_ID], help_text="GET /v1/models.")
    messages = MessageInSerializer(
        many=True,
        help_text="The last is the question (role user); the earlier user messages are the "
        "conversation it follows: a client that resends them continues the same stored "
        "conversation (follow-ups read in context).",
    )
    stream = serializers.BooleanField(required=False, default=False)
    metadata = MetadataSerializer(required=False)
    file_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1),
        max_length=MAX_FILE_IDS,
        required=False,
        help_text="Your personal files (POST /api/files) to answer from too.",
    )


class ClientCitationSerializer(serializers.Serializer):
    n = serializers.IntegerField(help_text="The [n] marker in the content.")
    document_id = serializers.IntegerField(allow_null=True)
    title = serializers.CharField()
    page = serializers.IntegerField(allow_null=True)
    section = serializers.CharField(allow_null=True)
    sheet = serializers.CharField(allow_null=True)
    cells = serializers.CharField(allow_null=True)
    location = serializers.CharField(help_text='"Page 3 · Leave > Annual leave", "Stocks!A4:E4"')
    excerpt = serializers.CharField()
    link = serializers.CharField(help_text="The document page at the cited passage.")
    similarity = serializers.FloatField(allow_null=True)
    stale = serializers.BooleanField()


class SourcedExtensionSerializer(serializers.Serializer):
    conversation_id = serializers.UUIDField()
    message_id = serializers.UUIDField(help_text="The stored answer (feedback: /api/messages).")
    outcome = serializers.ChoiceField(choices=["answered", "weak_evidence", "refused"])
    citations = ClientCitationSerializer(many=True)
    searched_document = serializers.DictField(allow_null=True)
    searched_documents = serializers.ListField(
        child=serializers.DictField(),
        help_text="Every document the question named and the "
        "answer was found in ({id, title}); searched_document is the first.",
    )
    search_query = serializers.CharField()
    warnings = serializers.ListField(child=serializers.CharField())
    suggestions = serializers.ListField(child=serializers.CharField())


class AssistantMessageSerializer(serializers.Serializer):
    role = serializers.CharField(default="assistant")
    content = serializers.CharField(
        help_text="The answer with its [n] markers, the weak-evidence notice when it applies, "
        'and a Markdown "Sources" list; or the refusal (an ordinary message) and suggestions.'
    )
    refusal = serializers.CharField(allow_null=True, help_text="Always null.")
    sourced = SourcedExtensionSerializer(help_text="Sourced's extension: structured citations.")


class CompletionChoiceSerializer(serializers.Serializer):
    index = serializers.IntegerField()
    message = AssistantMessageSerializer()
    finish_reason = serializers.CharField()


class CompletionSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField(default="chat.completion")
    created = serializers.IntegerField()
    model = serializers.CharField()
    choices = CompletionChoiceSerializer(many=True)
    sourced = SourcedExtensionSerializer()


STREAM_DESCRIPTION = f"""With `"stream": true`: `data: {{chat.completion.chunk}}` frames — the
role, the answer's text as it is produced, its ending (notice, Sources list), then a last chunk
with `finish_reason: "stop"` and the `sourced` extension field — and `data: [DONE]`. An error
after the answer started is a frame `data: {{"error": {{...}}}}` before `[DONE]` (the part
already sent is kept, stored with status error).

Auth: `Authorization: Bearer <API token>` (/account/tokens/), staff only. Each call is stored as
an exchange of a private conversation of yours (history, feedback and insights see it); its id
is returned in the `{CONVERSATION_HEADER}` header. Rate limit and flood rule: those of
POST /api/chat (429 with Retry-After). Parameters such as temperature are accepted and ignored:
answers are built from the documents."""

ERRORS = {
    status: OpenApiResponse(OpenAiErrorSerializer, description=meaning)
    for status, meaning in {
        400: "Not JSON.",
        401: "No token, or an invalid or expired one.",
        403: "Not a staff user.",
        404: "Unknown model, someone else's conversation, unknown file ids.",
        409: "The idempotency key was used for another question, or is still being answered.",
        422: "No messages, the last not a user's, an empty or too long question.",
        429: "The rate limit or the flood rule: wait Retry-After seconds.",
        503: "The knowledge base or the language model cannot be reached right now.",
    }.items()
}


class ModelsSchema(APIView):
    @extend_schema(
        operation_id="v1_models_list",
        summary="The models you may call (OpenAI-compatible)",
        responses={200: ModelListSerializer, 401: ERRORS[401], 403: ERRORS[403]},
        tags=["openai"],
    )
    def get(self, request: Request) -> Response:  # pragma: no cover - never routed
        raise NotImplementedError


class ModelSchema(APIView):
    @extend_schema(
        operation_id="v1_models_retrieve",
        summary="One model (OpenAI-compatible)",
        responses={200: OpenAiModelSerializer, 401: ERRORS[401], 404: ERRORS[404]},
        tags=["openai"],
    )
    def get(self, request: Request, model_id: str) -> Response:  # pragma: no cover
        raise NotImplementedError


class CompletionsSchema(APIView):
    @extend_schema(
        operation_id="v1_chat_completions",
        summary="Ask a question, OpenAI-compatible (cited answer)",
        description=STREAM_DESCRIPTION,
        request=CompletionRequestSerializer,
        responses={
            (200, "application/json"): CompletionSerializer,
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="chat.completion.chunk frames, then [DONE]."
            ),
            **ERRORS,
        },
        parameters=[
            OpenApiParameter(CONVERSATION_HEADER, OpenApiTypes.UUID, OpenApiParameter.HEADER),
            OpenApiParameter("Idempotency-Key", OpenApiTypes.STR, OpenApiParameter.HEADER),
        ],
        tags=["openai"],
    )
    def post(self, request: Request) -> Response:  # pragma: no cover - never routed
        raise NotImplementedError


def add_openai_endpoints(endpoints: list, **kwargs) -> list:
    """PREPROCESSING_HOOKS entry: document /v1."""
    if any(path == COMPLETIONS_PATH for path, *_ in endpoints):
        return endpoints
    return [
        *endpoints,
        (MODELS_PATH, r"^v1/models$", "GET", ModelsSchema.as_view()),
        (MODEL_PATH, r"^v1/models/(?P<model_id>[^/]+)$", "GET", ModelSchema.as_view()),
        (COMPLETIONS_PATH, r"^v1/chat/completions$", "POST", CompletionsSchema.as_view()),
    ]
