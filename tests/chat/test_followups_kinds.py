"""Follow-ups of the kinds real dialogues hold (chat/answering/followups.py): those that change
the aspect, ask for more, or answer the assistant's implicit question. Planned against a real
knowledge base (its vocabulary)."""

from __future__ import annotations

import pytest

from chat.answering.followups import unknown_own_terms
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
