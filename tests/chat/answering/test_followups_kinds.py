"""Follow-ups of the kinds real dialogues hold (chat/answering/followups.py): those that change
the aspect, ask for more, or answer the assistant's implicit question. Planned against a real
knowledge base (its vocabulary)."""

from __future__ import annotations

import pytest

from chat.answering.followups import (
    SearchPlan,
    Turn,
    answers_the_assistant,
    asks_for_more,
    search_plan,
    unknown_own_terms,
)
from knowledge.access import OPERATOR
from knowledge.vocabulary import vocabulary_get
from tests.support.knowledge_base import document_create

DENTAL_TEXTS = [
    "Your own coverage begins on your 31st day of employment. Coverage for a partner or child "
    "you add later starts on the first day of the month after Benefits receives the form.",
    "Preventive care is paid at 100%: two check-ups and cleanings a year. Sealants on permanent "
    "molars are also paid in full for children under 14.",
    "Major care such as crowns and bridges is paid at 50% after a 12-month waiting period.",
    "If you are retiring, different rules apply. Retirees with at least 10 years of service can "
    "stay on the dental plan at the group rate for life.",
    "The plan is free for employees. Adding a partner costs 14.50 a month.",
]


@pytest.fixture
def dental_kb(transactional_db):
    document = document_create(title="Dental plan", texts=DENTAL_TEXTS)
    vocabulary_get(reader=OPERATOR, wait=True)  # this knowledge base's, not the previous test's
    return document


@pytest.mark.parametrize(
    "question",
    [
        "anything else?",
        "what else should I know?",
        "tell me more",
        "yes, I'm retiring",
        "yes, I am 70",
        "how long do I have to wait?",
        "how much does it cost?",
    ],
)
def test_words_that_ask_or_answer_rather_than_name_are_never_unknown(dental_kb, question):
    assert unknown_own_terms(question, reader=OPERATOR) == []


def test_a_word_that_names_something_the_knowledge_base_lacks_is_unknown(dental_kb):
    unknown = unknown_own_terms("Can I spend it on a gym membership?", reader=OPERATOR)
    assert "gym" in unknown and "membership" in unknown


# --- The plan of each kind (pure: no database) -----------------------------------------------
PARTNER = Turn(
    question="Can my partner join the dental plan?",
    answer="You can add your spouse, civil partner or a domestic partner. [1]",
    answered=True,
    cited_document_ids=(4,),
)
PRICES = Turn(
    question="How much is a gym membership?",
    answer=(
        "Staff memberships cost 28 a month and public memberships 42 a month. [1] Military "
        "veterans can ask for a reduced rate; see Veterans. [1]"
    ),
    answered=True,
    cited_document_ids=(9,),
)


@pytest.mark.parametrize(
    "question", ["anything else?", "What else?", "tell me more", "what else should I know?"]
)
def test_asking_for_more_searches_what_the_previous_question_was_searched_as(question):
    assert asks_for_more(question)
    plan = search_plan(question, [PRICES])
    assert plan.contextual and plan.query == PRICES.question
    assert plan.prefer_documents == (9,)
    assert plan.fallback == question and plan.fallback_within == (9,)


def test_asking_for_more_after_a_refusal_is_read_as_any_follow_up():
    refused = Turn(question="How much is a gym membership?", answered=False)
    plan = search_plan("anything else?", [refused])
    assert plan.query == "How much is a gym membership? anything else?"
    assert plan.fallback_within == ()


@pytest.mark.parametrize(
    "question",
    ["Who else appeared on the compilation?", "Are there other fees?", "Tell me about parking"],
)
def test_a_question_with_words_of_its_own_does_not_only_ask_for_more(question):
    assert not asks_for_more(question)


@pytest.mark.parametrize(
    "question",
    ["yes, I am a veteran", "I'm 70", "we want to pay by bank transfer", "No, it's a lease car"],
)
def test_replies_to_the_assistant(question):
    assert answers_the_assistant(question)


@pytest.mark.parametrize(
    "question",
    ["I lost my badge, what do I do?", "What is the dress code?", "dress code policy"],
)
def test_questions_and_keywords_are_not_replies(question):
    assert not answers_the_assistant(question)


def test_a_reply_is_read_in_context_first_and_as_written_anywhere_after():
    plan = search_plan("yes, I am a veteran", [PRICES])
    assert plan.contextual and plan.query == "How much is a gym membership? yes, I am a veteran"
    assert plan.fallback == "yes, I am a veteran"
    assert plan.fallback_within == ()  # as written it may mean something anywhere
    assert plan.prefer_documents == (9,)


def test_an_aspect_change_keeps_the_subject_and_adds_the_new_aspect():
    plan = search_plan("When does the cover start?", [PARTNER])
    # Self-contained as written: searched so first, in context only should that fail.
    assert plan.query == "When does the cover start?" and not plan.contextual
    assert plan.fallback == "Can my partner join the dental plan? When does the cover start?"


@pytest.mark.parametrize(
    "question", ["anything else?", "yes, I am a veteran", "When does the cover start?"]
)
def test_without_a_conversation_every_kind_is_searched_as_written(question):
    """Standalone questions (no previous turn) are planned as before: nothing here reaches
    them."""
    assert search_plan(question, []) == SearchPlan(query=question)
