"""Exchanges with known figures for the insights (chat/insights/): stored directly, at chosen
times, with their mode, timings, citations and ratings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from chat.models import Conversation, Feedback, Message
from knowledge.collections import collection_create
from knowledge.models import Chunk, Document
from tests.support.conversations import exchange_create
from tests.support.knowledge_base import document_create

# The scenario's days: two in the first week, one in the next; one in the period before.
MONDAY = date(2026, 3, 2)
TUESDAY = date(2026, 3, 3)
NEXT_MONDAY = date(2026, 3, 10)
BEFORE = date(2026, 2, 25)
PRIVATE_QUESTION = "How do I expense a taxi ride home?"
SHARED_REFUSED = "how do I  expense a taxi ride home"
CAR_PARK = "Where is the visitors' car park?"
PAY_BANDS = "Pay bands (insights test)"


def at(day: date, hour: int) -> datetime:
    return datetime(day.year, day.month, day.day, hour, tzinfo=UTC)


def exchange_at(
    conversation: Conversation,
    *,
    when: datetime,
    question: str,
    status: str = Message.Status.COMPLETE,
    mode: str = Message.Mode.EXTRACTIVE,
    first_event_ms: float | None = None,
    total_ms: float | None = None,
    cited: Sequence[Chunk] = (),
    ratings: Sequence[tuple[object, int]] = (),
) -> Message:
    """A stored exchange asked and answered at `when`, rated by each (user, ±1) of `ratings`;
    returns the answer."""
    asked, answer = exchange_create(
        conversation,
        question=question,
        answer=f"Answer to: {question}",
        cited=cited,
        status=status,
    )
    Message.objects.filter(pk=asked.pk).update(created_at=when)
    Message.objects.filter(pk=answer.pk).update(
        created_at=when, mode=mode, first_event_ms=first_event_ms, total_ms=total_ms
    )
    for user, rating in ratings:
        Feedback.objects.create(user=user, message=answer, rating=rating)
    return answer


@dataclass
class Scenario:
    users: dict[str, object] = field(default_factory=dict)
    documents: dict[str, Document] = field(default_factory=dict)


def insights_scenario() -> Scenario:
    """Users anna, ben (in HR) and carl (staff); documents "Leave policy", "Expenses guide",
    "Unused handbook" (General), a disabled "Old memo" and PAY_BANDS (an HR-only collection);
    eight exchanges (figures in tests/chat/insights/test_insights.py):

    | when | who | conversation | mode | outcome | first event | cites | ratings |
    |---|---|---|---|---|---|---|---|
    | MONDAY 10:00 | anna | shared | extractive | answered | 100 ms | Leave | up (anna, ben) |
    | MONDAY 11:00 | anna | shared | extractive | answered | 200 ms | Leave, Expenses | down (ben) |
    | MONDAY 12:00 | ben | private | extractive | refused (PRIVATE_QUESTION) | 50 ms | | |
    | TUESDAY 09:00 | ben | shared | generative | answered | 400 ms | Pay bands | |
    | TUESDAY 10:00 | anna | shared | extractive | refused (SHARED_REFUSED) | 60 ms | | |
    | TUESDAY 11:00 | carl | shared | extractive | error | | | |
    | NEXT_MONDAY 09:00 | anna | shared | extractive | refused (CAR_PARK) | 70 ms | | |
    | BEFORE 09:00 | anna | shared | extractive | answered | 1000 ms | | |
    """
    users = get_user_model().objects
    people = {
        name: users.create_user(username=name, is_staff=True) for name in ("anna", "ben", "carl")
    }
    hr = Group.objects.create(name="HR (insights)")
    people["ben"].groups.add(hr)
    restricted = collection_create(name="HR only (insights)", groups=[hr])
    documents = {
        "leave": document_create(title="Leave policy", texts=["Staff get 25 days of leave."]),
        "expenses": document_create(title="Expenses guide", texts=["Taxis need a receipt."]),
        "unused": document_create(title="Unused handbook", texts=["The canteen opens at 8."]),
        "old": document_create(title="Old memo", texts=["Retired text."], enabled=False),
        "pay": document_create(
            title=PAY_BANDS, texts=["Grade 7 is paid on band Q."], collection=restricted
        ),
    }
    chunk = {key: document.chunks.order_by("index").first() for key, document in documents.items()}
    shared = {
        name: Conversation.objects.create(owner=person, title=f"{name}'s questions")
        for name, person in people.items()
    }
    private = Conversation.objects.create(owner=people["ben"], title="Ben's own", is_private=True)
    anna, ben = people["anna"], people["ben"]
    exchange_at(
        shared["anna"],
        when=at(MONDAY, 10),
        question="How many days of leave do I get?",
        first_event_ms=100,
        total_ms=300,
        cited=[chunk["leave"]],
        ratings=[(anna, 1), (ben, 1)],
    )
    exchange_at(
        shared["anna"],
        when=at(MONDAY, 11),
        question="Can I carry leave over and claim taxis?",
        first_event_ms=200,
        total_ms=500,
        cited=[chunk["leave"], chunk["expenses"]],
        ratings=[(ben, -1)],
    )
    exchange_at(
        private,
        when=at(MONDAY, 12),
        question=PRIVATE_QUESTION,
        status=Message.Status.REFUSED,
        first_event_ms=50,
        total_ms=50,
    )
    exchange_at(
        shared["ben"],
        when=at(TUESDAY, 9),
        question="What band is Grade 7 on?",
        mode=Message.Mode.GENERATIVE,
        first_event_ms=400,
        total_ms=900,
        cited=[chunk["pay"]],
    )
    exchange_at(
        shared["anna"],
        when=at(TUESDAY, 10),
        question=SHARED_REFUSED,
        status=Message.Status.REFUSED,
        first_event_ms=60,
        total_ms=60,
    )
    exchange_at(
        shared["carl"],
        when=at(TUESDAY, 11),
        question="Is the office open on Sunday?",
        status=Message.Status.ERROR,
    )
    exchange_at(
        shared["anna"],
        when=at(NEXT_MONDAY, 9),
        question=CAR_PARK,
        status=Message.Status.REFUSED,
        first_event_ms=70,
        total_ms=70,
    )
    exchange_at(
        shared["anna"],
        when=at(BEFORE, 9),
        question="When is payday?",
        first_event_ms=1000,
        total_ms=1500,
    )
    return Scenario(users=people, documents=documents)


MONTH_QUESTIONS = [
    "How many days of annual leave do I get?",
    "Can I carry unused leave into next year?",
    "How do I claim a taxi fare?",
    "What is the mileage rate for my own car?",
    "How long must my password be?",
    "Who approves overtime?",
    "When are expenses paid?",
    "Can I work from home on Fridays?",
]
MONTH_REFUSED = [
    "Where is the visitors' car park?",
    "Is there a staff discount at the gym?",
    "What is the Wi-Fi password in the meeting rooms?",
    "Can I bring my dog to the office?",
]


def insights_month(
    *, users: Sequence[object], documents: Sequence[Document], last: date, days: int = 30
) -> int:
    """A month-like spread of exchanges for screenshots: `days` days ending `last`, 4 to 16 a
    day by `users` (each with a shared and a private conversation), about one in six refused,
    one in four generative, answers citing 1 to 3 of `documents` (the first ones most), one in
    six rated. Deterministic; returns the number of exchanges."""
    import math
    import random
    from datetime import timedelta

    rng = random.Random(7)
    chunks = [document.chunks.order_by("index").first() for document in documents]
    weights = [1 / (n + 1) for n in range(len(chunks))]
    conversations = {
        (user.pk, private): Conversation.objects.create(
            owner=user,
            title=f"{user.username} ({'private' if private else 'shared'})",
            is_private=private,
        )
        for user in users
        for private in (False, True)
    }
    made = 0
    for offset in range(days):
        day = last - timedelta(days=days - 1 - offset)
        count = 4 + round(6 * abs(math.sin(offset / 5))) + rng.randint(0, 6)
        refusal = 0.08 + 0.18 * abs(math.cos(offset / 7))
        for _ in range(count):
            user = rng.choice(users)
            conversation = conversations[(user.pk, rng.random() < 0.2)]
            generative = rng.random() < 0.25
            roll = rng.random()
            status = (
                Message.Status.REFUSED
                if roll < refusal
                else Message.Status.ERROR
                if roll > 0.98
                else Message.Status.COMPLETE
            )
            answered = status == Message.Status.COMPLETE
            first = max(40.0, rng.gauss(900 if generative else 320, 120))
            exchange_at(
                conversation,
                when=at(day, rng.randint(8, 18)),
                question=rng.choice(MONTH_QUESTIONS if answered else MONTH_REFUSED),
                status=status,
                mode=Message.Mode.GENERATIVE if generative else Message.Mode.EXTRACTIVE,
                first_event_ms=None if status == Message.Status.ERROR else first,
                total_ms=None if status == Message.Status.ERROR else first * 3,
                cited=sorted(
                    set(rng.choices(chunks, weights=weights, k=rng.randint(1, 3))),
                    key=lambda chunk: chunk.pk,
                )
                if answered
                else (),
                ratings=[(user, -1 if rng.random() < 0.25 else 1)]
                if answered and rng.random() < 0.17
                else (),
            )
            made += 1
    return made
