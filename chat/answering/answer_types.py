"""Answer types: what kind of thing a question asks for, and whether a sentence holds one.

A "when" question needs a date, a time or a duration in the sentence, a "how many / how much /
how long" question a number or an amount, a "who" question a name (a capitalised word past the
sentence's first) or a role. `answer_type` is what the evidence check's fitted veto was fitted
on (chat/answering/features.py); `expected_answer` adds the cue the sentence choice uses
(chat/answering/extractive.py): a question about a time span named by a noun ("the refund
window", "the notice period", "the deadline for claims") wants a duration — a number with a
unit of time — even without "how long".
"""

from __future__ import annotations

import re

_WHEN = re.compile(r"^\s*when\b|\b(what|which) (year|date|day|month|time|century)\b", re.I)
_HOW_MANY = re.compile(
    r"\bhow (many|much|long|far|often|old|big|tall|large|high|fast|soon|early|late)\b|"
    r"\bwhat (percentage|proportion|share|number|amount|age)\b",
    re.I,
)
_WHO = re.compile(r"^\s*(who|whom|whose)\b|\b(who|whom|whose) (is|was|were|are|did|does)\b", re.I)
_NUMBER_WORDS = (
    "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|"
    "forty|fifty|hundred|hundreds|thousand|thousands|million|millions|billion|dozen|half|"
    "twice|once|several|few|single|double|percent|per cent"
)
_NUMBER = re.compile(rf"\d|%|£|\$|€|\b({_NUMBER_WORDS})\b", re.I)
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_TIME = re.compile(
    rf"\d|\b({_MONTHS}|{_DAYS}|century|centuries|decade|year|years|month|months|week|weeks|"
    r"day|days|hour|hours|minute|minutes|morning|evening|night|noon|midnight|annual|annually|"
    r"monthly|weekly|daily|today|tomorrow|spring|summer|autumn|winter|era|age|period|reign|"
    r"before|after|during|until|since|ago|later|earlier|immediately|once)\b",
    re.I,
)
_ROLE = re.compile(
    r"\b(team|manager|director|head|department|office|officer|company|committee|board|"
    r"council|government|king|queen|president|minister|emperor|pope|he|she|they|people|"
    r"group|staff|helpdesk|desk|owner|founder|leader|employees?|customers?)\b",
    re.I,
)
_CAPITALISED = re.compile(r"(?<=\s)[A-Z][\w'’-]*")


def answer_type(question: str) -> str:
    """What kind of thing the question asks for: "when", "number", "who" or "" (any)."""
    if _HOW_MANY.search(question):
        return "number"
    if _WHEN.search(question):
        return "when"
    if _WHO.search(question):
        return "who"
    return ""


def type_matches(kind: str, sentence: str) -> bool:
    """Whether `sentence` holds something of the answer type `kind` ("" matches anything)."""
    if kind == "number":
        return bool(_NUMBER.search(sentence))
    if kind == "when":
        return bool(_TIME.search(sentence))
    if kind == "who":
        return bool(_CAPITALISED.search(sentence) or _ROLE.search(sentence))
    return True


# A time span named by a noun: "the refund window", "the notice period", "the claims deadline".
_SPAN_CUE = re.compile(
    r"\b(window|period|deadline|time ?limit|time ?frame|turnaround|notice|how long|how soon)\b",
    re.I,
)
_HOW_OFTEN = re.compile(r"\bhow often\b|\bhow frequently\b", re.I)
_FREQUENCY = re.compile(
    r"\b(every|each|per|a|an|once|twice|\d+ times)\s+(\w+\s+)?"
    r"(second|minute|hour|day|week|fortnight|month|quarter|year)s?\b|"
    r"\b(hourly|daily|weekly|fortnightly|monthly|quarterly|annually|yearly)\b",
    re.I,
)
_DURATION = re.compile(
    rf"((?<!\d)\d+|\b({_NUMBER_WORDS}))[\s-]*(full |working |business |calendar |clear )?"
    r"(second|minute|hour|day|week|fortnight|month|quarter|year)s?\b",
    re.I,
)


def expected_answer(question: str) -> str:
    """`answer_type`, "frequency" for "how often", or "duration" when the question names a time
    span ("the refund window", "the notice period") and asks for nothing more specific."""
    if _HOW_OFTEN.search(question):
        return "frequency"
    kind = answer_type(question)
    if kind in ("", "when") and _SPAN_CUE.search(question):
        return "duration"
    return kind


def answer_matches(kind: str, sentence: str) -> bool:
    """`type_matches`; for "duration" a number with a unit of time ("30 days", "two working
    days"), for "frequency" a rate ("every month", "twice a year", "weekly")."""
    if kind == "frequency":
        return bool(_FREQUENCY.search(sentence))
    if kind == "duration":
        return bool(_DURATION.search(sentence))
    return type_matches(kind, sentence)
