"""Answers take their turn: at most settings.CHAT_ANSWER_SLOTS answers of a process are worked
on at once, the others wait in the order their questions came (`answer_turn`).

A question's work until its first event (storing it, embedding it, searching, checking the
evidence, writing an extractive answer) is CPU in one process, under one interpreter lock.
Without turns every question in progress shares that CPU at once, so each is slowed by all the
others and the one that needs two searches (a follow-up's second reading) takes twice as long
as the rest: the slow end of the latency grows with the number of people asking. With turns
the questions are worked on in arrival order, a few at a time, which keeps the machine as busy
and brings the slow end close to the middle
(docs/decisions/0171-answers-take-their-turn.md has the figures).

A turn ends at the answer's first event other than a warning (a refusal or the answer's
start), before the answerer waits on a language model (I/O, not this process's CPU), or when
the answer stops for any reason. A turn held longer than TURN_LEASE_SECONDS (a statement
waiting on a lock, say) no longer counts against the slots: the next answer starts, and one
stuck request never holds up the others.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import deque

from django.conf import settings

# How long a turn counts against the slots at most (seconds): a question's work to its first
# event takes tens of milliseconds, under load a few hundred.
TURN_LEASE_SECONDS = 5.0


class Turn:
    """One answer's turn: `end()` gives its slot to the next answer waiting (idempotent)."""

    def __init__(self, gate: _Gate) -> None:
        self._gate: _Gate | None = gate
        self._lease = asyncio.get_running_loop().call_later(TURN_LEASE_SECONDS, self.end)

    def end(self) -> None:
        if self._gate is None:
            return
        gate, self._gate = self._gate, None
        self._lease.cancel()
        gate.slot_pass()


class _Gate:
    """The slots of one event loop, and the answers waiting for one, first come first served."""

    def __init__(self) -> None:
        self.held = 0
        self.waiting: deque[asyncio.Future[None]] = deque()

    async def turn_take(self, slots: int) -> Turn:
        if slots <= 0 or (self.held < slots and not self.waiting):
            self.held += 1
            return Turn(self)
        waiter = asyncio.get_running_loop().create_future()
        self.waiting.append(waiter)
        try:
            await waiter  # `slot_pass` hands this answer the slot it frees (`held` unchanged)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.slot_pass()  # handed a slot, then cancelled: pass it on
            else:
                self.waiting.remove(waiter)
            raise
        return Turn(self)

    def slot_pass(self) -> None:
        while self.waiting:
            waiter = self.waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.held -= 1


_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Gate] = weakref.WeakKeyDictionary()


def _gate() -> _Gate:
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = _Gate()
    return gate


async def answer_turn() -> Turn:
    """Wait for this answer's turn (settings.CHAT_ANSWER_SLOTS answers of this event loop at
    once, in the order they asked; 0: no limit, the turn is given at once) and return it; the
    caller ends it (`Turn.end`) at its first event other than a warning, before it waits on a
    language model, and when it stops."""
    return await _gate().turn_take(settings.CHAT_ANSWER_SLOTS)


def answers_in_turn() -> int:
    """How many answers of this event loop hold a turn (must run on the loop)."""
    return _gate().held
