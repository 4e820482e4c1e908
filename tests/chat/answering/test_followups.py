"""Follow-up questions: which questions lean on the conversation, and the search query a
follow-up is read as (chat/answering/followups.py). Pure functions, no database."""

from __future__ import annotations

import pytest

from chat.answering import followups
from chat.answering.followups import (
    Turn,
    contextual_query,
    leans_on_conversation,
    said_before,
    search_plan,
)

LISBON = Turn(
    question="What is the nightly hotel cap in Lisbon?",
    search_query="What is the nightly hotel cap in Lisbon?",
    answer="The nightly hotel cap is 180 euros in Lisbon. [1]",
    answered=True,
    cited_document_ids=(7,),
)


@pytest.mark.parametrize(
    "question",
    [
        "And in London?",
        "and after ten years?",
        "What about part-time staff?",
        "How about contractors?",
        "Does that apply to contractors too?",
        "Is it paid?",
        "How long was she there?",
        "What were some themes of this album?",
        "Who else appeared on the compilation?",
        "Why?",
    ],
)
def test_questions_that_lean_on_the_conversation(question):
    assert leans_on_conversation(question)


@pytest.mark.parametrize(
    "question",
    [
        "What is the daily meal allowance abroad?",
        "How many days of annual leave do I get?",
        "Is there a dress code in the office?",
        "Who approves refunds above GBP 10,000?",
        "What is the policy on working from home?",
    ],
)
def test_self_contained_questions_do_not_lean_on_the_conversation(question):
    assert not leans_on_conversation(question)


@pytest.fixture
def content_words(monkeypatch):
    """The content-word reading of a follow-up in context (kept for `evaluate_followups
    --try CONTEXT_AS_WRITTEN=0,1`)."""
    monkeypatch.setattr(followups, "CONTEXT_AS_WRITTEN", 0)


def test_a_new_name_replaces_the_previous_one_and_the_topic_is_kept():
    query = contextual_query("And in London?", [LISBON])
    assert query == "What is the nightly hotel cap in? And in London?"


def test_a_new_number_replaces_the_previous_numbers():
    previous = Turn(question="How many days of leave after 5 years?", answered=True)
    query = contextual_query("And after 10 years?", [previous])
    assert query == "How many days of leave after years? And after 10 years?"


def test_the_content_word_reading_keeps_the_topic_words_and_the_new_name(content_words):
    assert contextual_query("And in London?", [LISBON]) == "nightly hotel cap London"
    previous = Turn(question="How many days of leave after 5 years?", answered=True)
    assert contextual_query("And after 10 years?", [previous]) == "days leave 10 years"


def test_the_context_carries_along_a_chain_of_follow_ups():
    first = Turn(question="When did Sally Ride leave NASA?", answered=True)
    second_query = contextual_query("What did she do at the Stanford Center?", [first])
    assert "Ride" in second_query and "Stanford" in second_query
    second = Turn(question="What did she do at the Stanford Center?", search_query=second_query)
    third_query = contextual_query("How long was she there?", [first, second])
    assert "Ride" in third_query and "Stanford" in third_query and "long" in third_query


def test_an_elliptical_follow_up_replaces_the_names_of_the_whole_topic():
    lisbon_then_london = [LISBON, Turn(question="And in London?", search_query="x London")]
    query = contextual_query("And in Paris?", lisbon_then_london)
    assert query == "What is the nightly hotel cap in? And in? And in Paris?"


def test_a_follow_up_is_searched_in_context_and_prefers_the_cited_document():
    plan = search_plan("And in London?", [LISBON])
    assert plan.contextual and plan.query == "What is the nightly hotel cap in? And in London?"
    assert plan.prefer_documents == (7,)
    # As written, "And in London?" means little: only searched within the subject document.
    assert plan.fallback == "And in London?" and plan.fallback_within == (7,)


def test_a_self_contained_question_is_searched_as_written_with_the_context_as_fallback():
    plan = search_plan("What is the daily meal allowance abroad?", [LISBON])
    assert not plan.contextual and plan.query == "What is the daily meal allowance abroad?"
    assert plan.fallback == (
        "What is the nightly hotel cap in Lisbon? What is the daily meal allowance abroad?"
    )


def test_the_first_question_of_a_conversation_is_searched_as_written():
    plan = search_plan("And in London?", [])
    assert plan == type(plan)(query="And in London?")


def test_a_refused_previous_question_still_gives_its_words_but_no_preferred_document():
    refused = Turn(question="What is the nightly hotel cap in Lisbon?", answered=False)
    plan = search_plan("And in London?", [refused])
    assert plan.query == "What is the nightly hotel cap in? And in London?"
    assert plan.prefer_documents == ()
    # The previous question may have been off-topic: searched as written anywhere.
    assert plan.fallback == "And in London?" and plan.fallback_within == ()


def test_a_question_picking_up_a_word_of_the_previous_answer_is_read_in_context():
    previous = Turn(
        question="How did Common begin his rap career?",
        answer="With the 1994 release of the album Resurrection, Common achieved fame. [1]",
        answered=True,
        cited_document_ids=(3,),
    )
    plan = search_plan("Were there any hit songs from the album?", [previous])
    assert plan.contextual and "Common" in plan.query and "album" in plan.query
    assert plan.fallback == "Were there any hit songs from the album?"


def test_the_rarest_previous_words_are_carried_when_there_are_too_many(content_words):
    previous = Turn(question="How did the famous singer Bocelli record the album Romanza?")
    rarity = {"Bocelli": 9.0, "Romanza": 8.0, "record": 3.0, "album": 2.0, "singer": 1.5}.get
    query = contextual_query("Did it sell well?", [previous], rarity=lambda w: rarity(w, 1.0))
    assert query == "singer Bocelli record album Romanza sell well"  # the 5 rarest


def test_the_previous_answer_is_where_a_follow_up_read_in_context_goes_on_from():
    in_context = "What is the nightly hotel cap in? And in London?"
    assert said_before("And in London?", in_context, [LISBON]) == LISBON.answer
    assert said_before("What is the meal allowance?", "What is the meal allowance?", [LISBON]) == ""
    refused = Turn(question=LISBON.question)
    assert said_before("And in London?", in_context, [refused]) == ""
    assert said_before("And in London?", "And in London?", []) == ""
