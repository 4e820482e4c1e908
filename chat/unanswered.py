"""Unanswered questions for the admin: refused questions, near-duplicates grouped.

Every refusal is stored as an assistant message with status `refused` replying to the
question. Questions that mean the same thing ("How do I expense a taxi?" / "how can I claim a
taxi ride") form one group, so an admin sees which gaps in the documents are asked about most.
Grouping is greedy over the questions newest first: a question joins the group whose first
(newest) question is the most cosine-similar to it when that similarity reaches `threshold`,
else it starts a new group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from django.db.models import Q

from chat.models import Message
from knowledge import embedding

SIMILARITY_THRESHOLD = 0.85
MAX_QUESTIONS = 500
MAX_VARIANTS = 5


@dataclass
class UnansweredQuestion:
    question_id: str
    conversation_id: str
    text: str
    asked_at: datetime
    reason: str  # the refusal shown to the user


@dataclass
class UnansweredGroup:
    """Near-duplicate refused questions; `questions` newest first."""

    questions: list[UnansweredQuestion] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.questions[0].text

    @property
    def count(self) -> int:
        return len(self.questions)

    @property
    def latest_at(self) -> datetime:
        return self.questions[0].asked_at

    @property
    def first_at(self) -> datetime:
        return self.questions[-1].asked_at

    @property
    def latest(self) -> UnansweredQuestion:
        return self.questions[0]

    @property
    def variants(self) -> list[str]:
        """Other wordings in the group (distinct, newest first), a few at most."""
        seen = {_key(self.text)}
        variants = []
        for question in self.questions[1:]:
            key = _key(question.text)
            if key not in seen:
                seen.add(key)
                variants.append(question.text)
        return variants[:MAX_VARIANTS]


def _key(text: str) -> str:
    return " ".join(text.lower().split()).rstrip("?!. ")


def unanswered_questions(
    *, limit: int = MAX_QUESTIONS, visible: Q | None = None
) -> list[UnansweredQuestion]:
    """The most recently refused questions, newest first; only those of the messages
    `visible` selects, when given (see `chat.selectors.conversations_admin_filter`)."""
    refusals = (
        Message.objects.filter(
            visible if visible is not None else Q(),
            role=Message.Role.ASSISTANT,
            status=Message.Status.REFUSED,
            reply_to__isnull=False,
        )
        .select_related("reply_to")
        .order_by("-created_at", "-pk")[:limit]
    )
    return [
        UnansweredQuestion(
            question_id=str(refusal.reply_to_id),
            conversation_id=str(refusal.conversation_id),
            text=refusal.reply_to.content,
            asked_at=refusal.reply_to.created_at,
            reason=refusal.content,
        )
        for refusal in refusals
    ]


def questions_group(
    questions: list[UnansweredQuestion], *, threshold: float = SIMILARITY_THRESHOLD
) -> list[UnansweredGroup]:
    """Greedy grouping of `questions` (newest first) by the cosine similarity of their
    embeddings; groups come newest first (by their newest question)."""
    if not questions:
        return []
    distinct = list(dict.fromkeys(_key(q.text) for q in questions))
    fitted = [embedding.truncate_to_limit(text)[0] for text in distinct]
    vectors = embedding.embed_texts(fitted)
    vector_of = {key: vectors[i] for i, key in enumerate(distinct)}
    groups: list[UnansweredGroup] = []
    heads: list[np.ndarray] = []
    for question in questions:
        vector = vector_of[_key(question.text)]
        if heads:
            similarities = np.stack(heads) @ vector
            best = int(np.argmax(similarities))
            if similarities[best] >= threshold:
                groups[best].questions.append(question)
                continue
        groups.append(UnansweredGroup(questions=[question]))
        heads.append(vector)
    return sorted(groups, key=lambda group: group.latest_at, reverse=True)


def unanswered_groups(
    *,
    limit: int = MAX_QUESTIONS,
    threshold: float = SIMILARITY_THRESHOLD,
    visible: Q | None = None,
) -> list[UnansweredGroup]:
    """The admin's "unanswered questions": the latest refused questions (of the messages
    `visible` selects), grouped."""
    return questions_group(unanswered_questions(limit=limit, visible=visible), threshold=threshold)
