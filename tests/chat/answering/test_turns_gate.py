"""Answers take their turn (chat/answering/turns_gate.py): at most CHAT_ANSWER_SLOTS answers of
a process are worked on at once until their first event, the others wait in the order they
asked; a turn ends before the answerer waits on a language model, and one held too long stops
counting."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from chat.answering import pipeline, turns_gate
from chat.answering.turns_gate import answer_turn, answers_in_turn
from chat.models import ChatSettings, Message
from tests.support.answers import collect
from tests.support.clients import fragments_until_idle, send_payload, socket_for
from tests.support.openai_server import Scripted, openai_server

LEAVE_QUESTION = "How many days of annual leave do full-time employees get?"
MEAL_QUESTION = "What is the daily meal allowance while travelling?"


async def _settled() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_answers_take_turns_in_the_order_they_asked(settings):
    settings.CHAT_ANSWER_SLOTS = 2
    first, second = await answer_turn(), await answer_turn()
    waiting = [asyncio.ensure_future(answer_turn()) for _ in range(3)]
    await _settled()
    assert not any(task.done() for task in waiting) and answers_in_turn() == 2
    second.end()
    await _settled()
    assert [task.done() for task in waiting] == [True, False, False]
    second.end()  # ending a turn twice gives nothing away
    await _settled()
    assert [task.done() for task in waiting] == [True, False, False]
    first.end()
    await _settled()
    assert [task.done() for task in waiting] == [True, True, False]
    waiting[0].result().end()
    waiting[1].result().end()
    await _settled()
    assert waiting[2].done() and answers_in_turn() == 1
    waiting[2].result().end()
    assert answers_in_turn() == 0


async def test_an_answer_that_stops_while_waiting_takes_no_slot_with_it(settings):
    settings.CHAT_ANSWER_SLOTS = 1
    held = await answer_turn()
    gone, next_one = asyncio.ensure_future(answer_turn()), asyncio.ensure_future(answer_turn())
    await _settled()
    gone.cancel()  # the client left while its question waited
    await _settled()
    held.end()
    await _settled()
    assert next_one.done() and answers_in_turn() == 1
    # Handed the slot, then stopped before it could run: the slot goes on to the next.
    after = asyncio.ensure_future(answer_turn())
    await _settled()
    next_one.result().end()
    after.cancel()
    await _settled()
    assert after.cancelled() and answers_in_turn() == 0
    (await answer_turn()).end()  # and the slot is free


async def test_a_turn_held_past_its_lease_lets_the_next_answer_start(settings, monkeypatch):
    settings.CHAT_ANSWER_SLOTS = 1
    monkeypatch.setattr(turns_gate, "TURN_LEASE_SECONDS", 0.05)
    stuck = await answer_turn()
    waiting = asyncio.ensure_future(answer_turn())
    await asyncio.sleep(0.02)
    assert not waiting.done()
    await asyncio.wait_for(waiting, timeout=1)
    stuck.end()  # ending it late changes nothing
    assert answers_in_turn() == 1
    waiting.result().end()
    assert answers_in_turn() == 0


async def test_with_no_slots_set_every_answer_starts_at_once(settings):
    settings.CHAT_ANSWER_SLOTS = 0
    turns = [await asyncio.wait_for(answer_turn(), timeout=1) for _ in range(50)]
    assert answers_in_turn() == 50
    for turn in turns:
        turn.end()


def _stores_recorded(monkeypatch) -> list[tuple[str, str]]:
    """("store", question) each time an exchange is stored; the test adds its events."""
    order: list[tuple[str, str]] = []
    original = pipeline.exchange_store_or_release

    async def recorded(request, *args, **kwargs):
        order.append(("store", request.question))
        return await original(request, *args, **kwargs)

    monkeypatch.setattr(pipeline, "exchange_store_or_release", recorded)
    return order


async def _ask(order: list[tuple[str, str]], user, question: str) -> None:
    async for event in pipeline.answer_stream(
        user=user, question=question, message_id=uuid.uuid4()
    ):
        order.append((event.type, question))


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("slots", [1, 0])
async def test_a_question_asked_meanwhile_is_worked_on_after_the_first_event_of_the_one_before(
    settings, monkeypatch, policies_kb, staff_user, slots
):
    settings.CHAT_ANSWER_SLOTS = slots
    await collect(user=staff_user, question="Who approves exceptions?")  # models warm
    order = _stores_recorded(monkeypatch)
    await asyncio.gather(
        _ask(order, staff_user, LEAVE_QUESTION), _ask(order, staff_user, MEAL_QUESTION)
    )
    first_event = order.index(("answer_start", LEAVE_QUESTION))
    second_store = order.index(("store", MEAL_QUESTION))
    assert order[0] == ("store", LEAVE_QUESTION)
    if slots:
        assert second_store > first_event
    else:  # both at once
        assert second_store < first_event
    assert {("answer_end", LEAVE_QUESTION), ("answer_end", MEAL_QUESTION)} <= set(order)
    assert answers_in_turn() == 0


@pytest.mark.django_db(transaction=True)
async def test_a_warning_before_the_answer_does_not_end_its_turn(
    settings, monkeypatch, policies_kb, staff_user
):
    settings.CHAT_ANSWER_SLOTS = 1
    await collect(user=staff_user, question="Who approves exceptions?")  # models warm
    order = _stores_recorded(monkeypatch)
    long_question = LEAVE_QUESTION + " " + "Please explain it in detail. " * 60  # cut: a warning
    await asyncio.gather(
        _ask(order, staff_user, long_question), _ask(order, staff_user, MEAL_QUESTION)
    )
    assert order.index(("warning", long_question)) < order.index(("answer_start", long_question))
    assert order.index(("store", MEAL_QUESTION)) > order.index(("answer_start", long_question))


@pytest.mark.django_db(transaction=True)
async def test_an_answer_waiting_on_its_language_model_holds_no_turn(
    settings, monkeypatch, policies_kb, staff_user
):
    settings.CHAT_ANSWER_SLOTS = 1
    with openai_server() as server:
        settings.LLM_BACKEND = "openai"
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_MODEL = "test-model"
        settings.LLM_API_KEY = "test-key"
        await ChatSettings.objects.aupdate_or_create(
            pk=1, defaults={"generation_mode": ChatSettings.Mode.GENERATIVE}
        )
        reply = Scripted(pieces=["Full-time staff get 25 days [1]."], wait=0.6)
        server.script(reply, reply)
        order = _stores_recorded(monkeypatch)
        await asyncio.gather(
            _ask(order, staff_user, LEAVE_QUESTION), _ask(order, staff_user, MEAL_QUESTION)
        )
    # The second question was stored and searched while the first one's model read its prompt.
    assert order.index(("store", MEAL_QUESTION)) < order.index(("answer_start", LEAVE_QUESTION))
    assert ("answer_end", MEAL_QUESTION) in order
    assert len(server.completions()) == 2


@pytest.mark.django_db(transaction=True)
async def test_a_question_stopped_while_it_waits_its_turn_leaves_the_socket_ready(
    settings, policies_kb, staff_user
):
    settings.CHAT_ANSWER_SLOTS = 1
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    held = await answer_turn()  # another answer is being worked on
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    await communicator.receive_from(timeout=10)  # the question shown, the chat busy
    await asyncio.sleep(0.2)
    assert answers_in_turn() == 1  # it waits
    await communicator.send_to(text_data=json.dumps({"action": "stop"}))
    stopped = "".join(await fragments_until_idle(communicator))
    assert 'data-busy="false"' in stopped  # the chat is ready for the next question
    held.end()
    assert answers_in_turn() == 0  # it took no slot with it
    await communicator.send_to(text_data=send_payload(MEAL_QUESTION))
    page = "".join(await fragments_until_idle(communicator))
    await communicator.disconnect()
    assert "45 euros" in page
    answers = [
        m async for m in Message.objects.filter(conversation_id=conversation_id, role="assistant")
    ]
    assert [m.status for m in answers] == [Message.Status.COMPLETE]
