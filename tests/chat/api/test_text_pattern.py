"""The schema's pattern for question-like text (`chat.api.serializers.TEXT_PATTERN`) says what
the server does: a string matches it exactly when the server, having cleaned and trimmed it,
finds something in it. Schemathesis found the two apart on a character above the Basic
Multilingual Plane, which the server took and the pattern refused."""

from __future__ import annotations

import re

from chat.answering.questions import question_normalize
from chat.api.serializers import TEXT_PATTERN
from chat.errors import AnswerError


def server_finds_text(text: str) -> bool:
    """Whether the server's own check takes `text` as a question (not empty once cleaned)."""
    try:
        question_normalize(text)
    except AnswerError:
        return False
    return True


def code_points_checked() -> list[int]:
    """Every character of the Basic Multilingual Plane; above it, the first and last 512 of each
    plane and every 61st between (all of them would take seconds)."""
    points = set(range(1, 0x10000))
    for plane in range(1, 17):
        start, end = plane * 0x10000, plane * 0x10000 + 0xFFFF
        points.update(range(start, start + 512))
        points.update(range(end - 511, end + 1))
        points.update(range(start, end, 61))
    return sorted(points)


def test_a_single_character_matches_the_pattern_exactly_when_the_server_finds_text_in_it():
    pattern = re.compile(TEXT_PATTERN)
    disagreements = [
        f"U+{point:04X}"
        for point in code_points_checked()
        if bool(pattern.match(chr(point))) != server_finds_text(chr(point))
    ]
    assert disagreements == []


def test_text_with_something_in_it_anywhere_matches_and_white_space_alone_does_not():
    pattern = re.compile(TEXT_PATTERN)
    kept = (
        "How much leave?",
        "  \U0001f642  ",
        "\u200b",
        "\ufeff\U00068b5f\n",
        "\uf8ff",
        "\U000f0000",
    )
    for text in kept:  # the last two private-use characters: a person's text, kept
        assert server_finds_text(text) and pattern.match(text), text
    for text in (" \t\n", "\u3000\u2028", "\x07\x1b", "\u0085\x7f"):
        assert not server_finds_text(text) and not pattern.match(text), text
    assert not pattern.match("leave\x00")  # DRF refuses NUL anywhere
    # A lone surrogate (a JSON body can escape one): refused by both.
    assert not server_finds_text("\ud800") and not pattern.match("\ud800")
