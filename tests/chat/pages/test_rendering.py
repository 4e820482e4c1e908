"""The fragments of a stream, rendered from the pipeline's event data as the consumer does."""

from __future__ import annotations

import uuid

import pytest

from chat.fragments import answer_start_html

QUESTION = "And in London?"


def bubble(**data) -> str:
    """The answer's bubble for an `answer_start` event carrying `data`."""
    event = {"message_id": str(uuid.uuid4()), "reply_to": str(uuid.uuid4()), **data}
    return answer_start_html(event, question=QUESTION, question_id=event["reply_to"])


def test_the_streaming_answer_says_what_was_searched_for_a_follow_up():
    html = bubble(search_query="hotel cap London")
    assert 'data-status="streaming"' in html and 'hx-swap-oob="beforeend:#messages"' in html
    assert "Searched for: hotel cap London" in html


@pytest.mark.parametrize("search_query", ["", "And in London?", "  and IN\tlondon?  "])
def test_nothing_is_said_when_the_search_was_the_question_itself(search_query):
    html = bubble(search_query=search_query)
    assert "data-search-query" not in html and "Searched for" not in html


def test_an_event_without_a_search_query_shows_none():
    assert "Searched for" not in bubble()


def test_the_search_query_is_escaped():
    html = bubble(search_query='hotel <img src=x onerror="alert(1)"> London')
    assert "<img" not in html
    assert "Searched for: hotel &lt;img src=x onerror=&quot;alert(1)&quot;&gt; London" in html


def test_a_regenerated_answer_replaces_the_previous_one_and_says_what_was_searched_for():
    event = {"message_id": str(uuid.uuid4()), "search_query": "hotel cap London"}
    html = answer_start_html(
        event, question=QUESTION, question_id=str(uuid.uuid4()), replace_target="#msg-old"
    )
    assert 'hx-swap-oob="outerHTML:#msg-old"' in html and "beforeend:#messages" not in html
    assert "Searched for: hotel cap London" in html
