"""Running the answering pipeline in a test, and the checks every answer must pass."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

from chat.answering.events import Event
from chat.answering.pipeline import AnswerOptions, answer_stream


async def collect(*, user, question, message_id=None, options=None, **kwargs) -> list[Event]:
    """Every event of one exchange."""
    return [
        event
        async for event in answer_stream(
            user=user,
            question=question,
            message_id=message_id or uuid.uuid4(),
            options=options or AnswerOptions(),
            **kwargs,
        )
    ]


def event_types(events: Sequence[Event]) -> list[str]:
    return [event.type for event in events]


_MARKER = re.compile(r" \[(\d+)\]")


def assert_answer_is_grounded(content: str, citations: Sequence[dict]) -> None:
    """Every sentence of the answer is verbatim text of the chunk its marker cites; markers are
    numbered 1.. in order of first use; the citations are exactly the cited chunks."""
    by_n = {citation["n"]: citation for citation in citations}
    parts = _MARKER.split(content)
    assert parts[-1] == "", f"the answer must end with a marker: {content!r}"
    sentences, numbers = parts[0:-1:2], [int(n) for n in parts[1::2]]
    assert sentences, "an answer has at least one sentence"
    first_use = list(dict.fromkeys(numbers))
    assert first_use == list(range(1, len(first_use) + 1)), f"markers out of order: {numbers}"
    assert sorted(by_n) == first_use, "citations must be exactly the cited chunks"
    assert len(sentences) <= 3
    for sentence, n in zip(sentences, numbers, strict=True):
        text = sentence.strip()
        assert text, "empty sentence before a marker"
        assert text in by_n[n]["text"], f"{text!r} is not verbatim text of citation [{n}]"
