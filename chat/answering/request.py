"""A chat request checked before anything is stored (step 1 of chat/answering/pipeline.py).

`request_validate` returns a `ValidatedRequest` or raises `AnswerError`: validation-failed 422
(empty or too long message, top_k outside 1..20, embedding not 384 finite numbers, more than
MAX_DOCUMENT_IDS document ids, file_ids not a list of at most 20 ids), bad-request 400
(malformed UUID). Reads nothing.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from django.contrib.auth.base_user import AbstractBaseUser

from chat.answering.questions import question_normalize
from chat.attachments import file_ids_validate
from chat.errors import AnswerError
from chat.ids import uuid_parse
from knowledge import embedding
from knowledge.access import Reader
from knowledge.retrieval import TOP_K_MAX, TOP_K_MIN

MAX_DOCUMENT_IDS = 200


@dataclass(frozen=True)
class AnswerOptions:
    """How to answer: top_k (1..20, default ChatSettings.default_top_k), only these documents,
    a question embedding supplied by the client (384 floats) instead of embedding the question
    on the server (used when the question is searched as written; a follow-up read in context
    is embedded on the server), or regenerate the answer of an earlier question
    (`message_id`)."""

    top_k: int | None = None
    document_ids: list[int] | None = None
    embedding: list[float] | None = None
    regenerate: bool = False
    file_ids: list[int] | None = None  # the asker's personal files to attach first


@dataclass(frozen=True)
class ValidatedRequest:
    """A validated request (step 1)."""

    user: AbstractBaseUser
    message_id: uuid.UUID
    conversation_id: uuid.UUID | None
    is_private: bool
    question: str | None  # None when regenerating: the stored question is answered
    top_k: int | None
    document_ids: list[int] | None
    supplied_vector: np.ndarray | None
    regenerate: bool
    file_ids: list[int] | None = None
    # The asker's `Reader` when the caller computed it for this request (a WebSocket, once per
    # message); None: `exchange_store` computes it.
    reader: Reader | None = None


def _top_k_validate(top_k: object) -> int | None:
    if top_k is None:
        return None
    if (
        isinstance(top_k, bool)
        or not isinstance(top_k, int)
        or not (TOP_K_MIN <= top_k <= TOP_K_MAX)
    ):
        raise AnswerError.validation(
            "top_k", f"top_k must be a whole number from {TOP_K_MIN} to {TOP_K_MAX}."
        )
    return top_k


def embedding_validate(values: Sequence[float] | None) -> np.ndarray | None:
    if values is None:
        return None
    message = f"embedding must be a list of {embedding.DIMENSIONS} finite numbers, not all zero."
    if isinstance(values, (str, bytes)) or len(values) != embedding.DIMENSIONS:
        raise AnswerError.validation("embedding", message)
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        raise AnswerError.validation("embedding", message)
    vector = np.asarray(values, dtype=np.float64)
    # Scaled by its largest value first: a vector of huge (or tiny) finite numbers is still a
    # direction, and its norm must not overflow (or underflow) to inf (or 0).
    scale = float(np.max(np.abs(vector))) if np.all(np.isfinite(vector)) else math.nan
    if not math.isfinite(scale) or scale == 0.0:
        raise AnswerError.validation("embedding", message)
    vector = vector / scale
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def _document_ids_validate(values: Sequence[int] | None) -> list[int] | None:
    if values is None:
        return None
    if (
        isinstance(values, (str, bytes))
        or len(values) > MAX_DOCUMENT_IDS
        or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values)
    ):
        raise AnswerError.validation(
            "document_ids",
            f"document_ids must be a list of at most {MAX_DOCUMENT_IDS} document ids.",
        )
    return sorted(set(values))


def request_validate(
    *,
    user: AbstractBaseUser,
    question: str | None,
    message_id: uuid.UUID | str,
    conversation_id: uuid.UUID | str | None,
    is_private: bool,
    options: AnswerOptions,
    reader: Reader | None = None,
) -> ValidatedRequest:
    """Every input checked before anything is stored (AnswerError otherwise). `reader`:
    `user`'s `Reader`, when the caller computed it for this request."""
    return ValidatedRequest(
        user=user,
        reader=reader,
        message_id=uuid_parse(message_id, "message_id"),
        conversation_id=(
            None if conversation_id is None else uuid_parse(conversation_id, "conversation_id")
        ),
        is_private=is_private,
        question=None if options.regenerate else question_normalize(question),
        top_k=_top_k_validate(options.top_k),
        document_ids=_document_ids_validate(options.document_ids),
        supplied_vector=embedding_validate(options.embedding),
        regenerate=options.regenerate,
        file_ids=file_ids_validate(options.file_ids),
    )
