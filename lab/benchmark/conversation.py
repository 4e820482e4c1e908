"""The long conversation whose load time is measured: 100 questions and their answers, with
citations, written by the chat's own services (`exchange_begin`, `answer_finish`) from real
retrieval results and real extractive answers, the way the pipeline stores an exchange."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from django.contrib.auth.base_user import AbstractBaseUser

from chat import services
from chat.answering.extractive import extractive_answer, sentence_vectors_preload
from chat.answering.questions import question_normalize
from chat.models import Citation, Message
from knowledge.access import OPERATOR
from knowledge.retrieval import chunks_search

PAIRS = 100
TOP_K = 5
# Distinct questions at most: the answers repeat after that (the load time depends on the
# messages and citations stored, not on their variety; each distinct answer costs a search).
DISTINCT_QUESTIONS = 20


@dataclass(frozen=True)
class LongConversation:
    id: uuid.UUID
    messages: int
    citations: int


def conversation_build(
    *,
    user: AbstractBaseUser,
    questions: Sequence[str],
    vectors: np.ndarray,
    pairs: int = PAIRS,
    progress: Callable[[int], None] | None = None,
) -> LongConversation:
    """A shared conversation of `user` with `pairs` question/answer pairs, cycling through the
    first `DISTINCT_QUESTIONS` questions. Every answer is the extractive answer over the
    question's top chunks (no evidence check, so every answer cites at least one source)."""
    if not questions:
        raise ValueError("No questions to build the conversation from.")
    conversation_id = uuid.uuid4()
    distinct = min(len(questions), DISTINCT_QUESTIONS)
    answers: dict[int, tuple[str, list]] = {}  # question index → (content, cited chunks)
    for pair in range(pairs):
        i = pair % distinct
        question = question_normalize(questions[i])
        if i not in answers:
            result = chunks_search(
                query=question, reader=OPERATOR, top_k=TOP_K, query_vector=vectors[i]
            )
            if not result.chunks:
                raise ValueError(f"Retrieval found nothing for {question!r}.")
            sentence_vectors_preload(result.chunks)  # as the pipeline does
            answer = extractive_answer(
                question=question, question_vector=result.query_vector, chunks=result.chunks
            )
            answers[i] = (answer.text, answer.cited_chunks)
        content, cited = answers[i]
        claim = services.exchange_begin(
            user=user,
            message_id=uuid.uuid4(),
            question=question,
            conversation_id=conversation_id,
            is_private=False,
            mode=Message.Mode.EXTRACTIVE,
            top_k=TOP_K,
        )
        services.answer_finish(
            answer_id=claim.answer.pk,
            status=Message.Status.COMPLETE,
            content=content,
            cited=cited,
        )
        if progress:
            progress(1)
    return LongConversation(
        id=conversation_id,
        messages=Message.objects.filter(conversation_id=conversation_id).count(),
        citations=Citation.objects.filter(message__conversation_id=conversation_id).count(),
    )
