"""`POST /api/files`, `GET /api/files/{id}`, `DELETE /api/files/{id}`: a user's personal
files (docs/decisions/0081-personal-files.md). Thin adapters over chat/attachments.py.

An upload is refused by the size its request declares before its body is read, and a body
that declared no size or lied keeps at most the limit of its file (knowledge/uploads.py); each
user may upload settings.FILES_UPLOAD_RATE_LIMIT files
(docs/decisions/0148-uploads-and-sockets-with-limits.md)."""

from __future__ import annotations

from django.conf import settings
from django.template.defaultfilters import filesizeformat
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from chat.api.errors import error_response, rate_limited_response
from chat.api.schema import error_responses
from chat.api.serializers import PresentUUIDField
from chat.attachments import personal_file_add, personal_file_remove
from chat.errors import AnswerError
from chat.ratelimit import files_upload_rate_limited
from knowledge.models import Document
from knowledge.personal import PersonalFileError, personal_file_get, personal_file_state
from knowledge.uploads import UPLOAD_FORM_ALLOWANCE, UploadLimitHandler, declared_size
from pages.client_input import client_int


class FileUploadSerializer(serializers.Serializer):
    file = serializers.FileField(
        allow_empty_file=True,
        help_text="The file: PDF, DOCX, XLSX, CSV, PPTX, Markdown, HTML or text (the types the "
        "admin's uploads accept).",
    )
    conversation_id = PresentUUIDField(
        required=False,
        help_text="Attach the file to this conversation of yours (else attach it later with "
        "`file_ids` on `POST /api/chat`).",
    )


class FileSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField(source="title")
    size = serializers.IntegerField()
    status = serializers.SerializerMethodField(
        help_text="pending, processing, ready, failed or expired (its text is gone)."
    )
    error = serializers.CharField(help_text="Why reading the file failed (status failed).")
    expires_at = serializers.DateTimeField()

    def get_status(self, document: Document) -> str:
        return personal_file_state(document)


def _file_id(value: str) -> int:
    try:
        return client_int(value, minimum=1)
    except ValueError:
        raise AnswerError.not_found("There is no file with this id.") from None


def _too_large(declared: int) -> Response:
    limit = settings.PERSONAL_FILE_MAX_BYTES
    message = (
        f"The file is too large ({filesizeformat(declared)}); the limit is "
        f"{filesizeformat(limit)}. Nothing was uploaded."
    )
    return error_response(
        "validation-failed",
        message,
        status=422,
        details={"file": [message], "reason": "too-large"},
    )


class FileUploadApi(APIView):
    parser_classes = [MultiPartParser]

    def dispatch(self, request, *args, **kwargs):
        """A POST declaring a body over PERSONAL_FILE_MAX_BYTES (and the form's allowance) is
        answered before anything reads it (authentication's CSRF check would: it reads the
        form); any other gets `UploadLimitHandler` first among its upload handlers."""
        if request.method == "POST":
            declared = declared_size(request)
            limit = settings.PERSONAL_FILE_MAX_BYTES
            if declared > limit + UPLOAD_FORM_ALLOWANCE:
                return _too_large(declared)
            request.upload_handlers.insert(0, UploadLimitHandler(request, limit=limit))
        return super().dispatch(request, *args, **kwargs)

    @extend_schema(
        operation_id="files_upload",
        summary="Upload a personal file (read by you only; expires)",
        request={"multipart/form-data": FileUploadSerializer},
        responses={
            201: FileSerializer,
            **error_responses(
                400,
                401,
                403,
                404,
                415,
                422,
                429,
                s422="validation-failed: no file, an unsupported type, an empty or too large "
                "file, or over your quota (`details.reason`: unsupported-type, empty, "
                "too-large, quota-exceeded).",
            ),
        },
        tags=["files"],
    )
    def post(self, request: Request) -> Response:
        if retry_after := files_upload_rate_limited(request.user):
            wait = f"{retry_after} second{'s' if retry_after != 1 else ''}"
            return rate_limited_response(
                retry_after,
                "You are uploading files faster than the limit allows "
                f"({settings.FILES_UPLOAD_RATE_LIMIT}). Please wait {wait}, then try again.",
            )
        serializer = FileUploadSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        conversation_id = serializer.validated_data.get("conversation_id")
        try:
            document = personal_file_add(
                owner=request.user,
                upload=serializer.validated_data["file"],
                conversation_id=conversation_id,
            )
        except PersonalFileError as exc:
            return error_response(
                "validation-failed",
                exc.message,
                status=422,
                details={"file": [exc.message], "reason": exc.code},
            )
        return Response(FileSerializer(document).data, status=status.HTTP_201_CREATED)


class FileDetailApi(APIView):
    @extend_schema(
        operation_id="files_get",
        summary="A personal file's status",
        description="A file that was removed, or purged once expired (its text is gone), is "
        "not found.",
        responses={200: FileSerializer, **error_responses(401, 403, 404)},
        tags=["files"],
    )
    def get(self, request: Request, file_id: str) -> Response:
        document = personal_file_get(owner=request.user, file_id=_file_id(file_id))
        if document is None or document.purged_at is not None:
            raise AnswerError.not_found("There is no file with this id.")
        return Response(FileSerializer(document).data)

    @extend_schema(
        operation_id="files_delete",
        summary="Remove a personal file now",
        responses={204: None, **error_responses(401, 403, 404)},
        tags=["files"],
    )
    def delete(self, request: Request, file_id: str) -> Response:
        personal_file_remove(owner=request.user, file_id=_file_id(file_id))
        return Response(status=status.HTTP_204_NO_CONTENT)
