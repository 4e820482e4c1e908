"""Questions as the pipeline takes them, and conversation titles (docs/product.md §7)."""

from __future__ import annotations

import pytest

from chat.answering.questions import conversation_title_from, question_normalize
from chat.errors import AnswerError


def test_title_of_a_long_first_message_is_cut_at_a_word_without_a_dangling_short_word():
    message = (
        "What is the university's policy on academic integrity and plagiarism in submitted "
        "coursework?"
    )
    assert (
        conversation_title_from(message)
        == "What is the university's policy on academic integrity and plagiarism…"
    )


def test_title_of_a_short_first_message_is_the_message():
    assert conversation_title_from("Refund?") == "Refund?"


def test_title_is_at_most_80_characters_plus_the_ellipsis_even_for_one_huge_word():
    title = conversation_title_from("x" * 300)
    assert title.endswith("…") and len(title) <= 81


def test_title_collapses_whitespace_and_drops_control_characters():
    assert conversation_title_from("  Where\tis\n the\x00 office?  ") == "Where is the office?"


def test_question_loses_control_characters_but_keeps_line_breaks():
    assert (
        question_normalize("How\x00 many\x1b days\r\nof leave?\x7f ") == "How many days\nof leave?"
    )


@pytest.mark.parametrize("text", ["", "   ", "\x00\x01\n"])
def test_empty_question_is_a_validation_error(text):
    with pytest.raises(AnswerError) as error:
        question_normalize(text)
    assert error.value.status == 422 and error.value.code == "validation-failed"
    assert "message" in error.value.details


def test_question_longer_than_the_bound_is_refused_with_a_clear_message(settings):
    settings.CHAT_MAX_MESSAGE_CHARS = 100
    assert question_normalize("a" * 100) == "a" * 100
    with pytest.raises(AnswerError) as error:
        question_normalize("a" * 101)
    assert error.value.status == 422
    assert "101 characters, the limit is 100" in error.value.message
