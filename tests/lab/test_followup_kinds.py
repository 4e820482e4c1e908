"""The follow-up figures per kind (lab/evaluation/followup_kinds.py): grouping by the
`followup_kind` label, the failures with what was searched, and a constant chosen on folds."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from chat.answering import followups
from lab.evaluation.dataset import DatasetQuestion, dataset_load
from lab.evaluation.followup_kinds import (
    AFTER_AN_ANSWER,
    adversarial_figures,
    constant_choose_on_folds,
    constant_set,
    failures_list,
    figures_by_kind,
    followup_kinds_read,
)
from lab.evaluation.runner import QuestionResult

HELPDESK = Path(__file__).resolve().parents[2] / "demo/eval/helpdesk-followups.json"


def result(qid, document, *, follows=None, cited=True, refused=False, query="q"):
    question = DatasetQuestion(
        id=qid,
        question=f"question {qid}",
        expect="answer",
        kind="answerable",
        document=document,
        answers=("gold",),
        follows=follows,
    )
    return QuestionResult(
        question=question,
        conversation_id=f"c-{follows or qid}",
        search_query=query,
        refused=refused,
        cited_texts=["the gold text"] if cited else ["other"],
        retrieved_texts=["the gold text"] if cited else ["other"],
    )


def test_the_helpdesk_dataset_loads_with_a_kind_for_every_follow_up():
    dataset = dataset_load(HELPDESK)
    kinds = followup_kinds_read(HELPDESK)
    follow_ups = [q for q in dataset.questions if q.follows]
    assert {q.id for q in follow_ups} == set(kinds)
    assert set(kinds.values()) == {"aspect", "more", "reply", "pronoun"}
    assert all(q.kind == "answerable" and q.answers for q in dataset.questions)


def test_a_follow_up_without_a_label_counts_as_unlabelled(tmp_path):
    path = tmp_path / "d.json"
    path.write_text(
        json.dumps(
            {
                "questions": [
                    {"id": "a", "question": "x"},
                    {"id": "b", "question": "y", "follows": "a"},
                    {"id": "c", "question": "z", "follows": "b", "followup_kind": "more"},
                ]
            }
        )
    )
    assert followup_kinds_read(path) == {"b": "unlabelled", "c": "more"}


def test_figures_are_grouped_per_kind_over_follow_ups_only():
    results = [
        result("a1", "d1"),
        result("a2", "d1", follows="a1"),
        result("b1", "d1", cited=False),
        result("b2", "d1", follows="b1", cited=False, refused=True),
    ]
    by_kind = figures_by_kind(results, {"a2": "more", "b2": "reply"})
    assert set(by_kind) == {"all", "more", "reply", AFTER_AN_ANSWER}
    assert by_kind["all"]["count"] == 2 and by_kind["all"]["citation_accuracy"] == 0.5
    assert by_kind["more"]["citation_accuracy"] == 1.0
    assert by_kind["reply"]["false_refusal_rate"] == 1.0


def test_the_follow_ups_of_answered_questions_are_counted_apart():
    results = [
        result("a1", "d1"),
        result("a2", "d1", follows="a1"),
        result("b1", "d1", refused=True),
        result("b2", "d1", follows="b1", cited=False, refused=True),
    ]
    by_kind = figures_by_kind(results, {})
    assert by_kind["all"]["count"] == 2 and by_kind["all"]["false_refusal_rate"] == 0.5
    after = by_kind[AFTER_AN_ANSWER]
    assert after["count"] == 1 and after["false_refusal_rate"] == 0.0
    assert after["citation_accuracy"] == 1.0


def test_adversarial_follow_ups_are_counted_with_the_shares_refused_and_flagged():
    question = DatasetQuestion(
        id="x2",
        question="q",
        expect="refusal",
        kind="adversarial",
        document=None,
        answers=(),
        follows="x1",
    )
    results = [
        result("x1", "d1"),
        QuestionResult(question=question, refused=True),
        QuestionResult(question=replace(question, id="y2"), refused=False),
        QuestionResult(question=replace(question, id="z2"), refused=False, flagged=True),
        QuestionResult(question=replace(question, id="w2"), refused=False),
    ]
    assert adversarial_figures(results) == {
        "count": 4,
        "refusal_rate": 0.25,
        "flagged_rate": 0.25,
    }


def test_failures_name_the_question_followed_what_was_searched_and_why():
    results = [
        result("b1", "d1"),
        result("b2", "d1", follows="b1", cited=False, refused=True, query="topic words"),
    ]
    [failure] = failures_list(results, {"b2": "reply"}, {"c-b1": ["sufficient", "unknown-terms"]})
    assert (failure.id, failure.kind, failure.previous) == ("b2", "reply", "question b1")
    assert (failure.search_query, failure.refused, failure.evidence) == (
        "topic words",
        True,
        "unknown-terms",
    )


def test_the_constant_is_chosen_on_the_other_folds_and_reported_on_the_held_out_one():
    # Value 1 is right on d1's follow-up, value 2 on d2's and d3's.
    def run(good_documents):
        return [
            result(f"{d}q2", d, follows=f"{d}q1", cited=d in good_documents)
            for d in ("d1", "d2", "d3")
        ]

    runs = {1.0: run({"d1"}), 2.0: run({"d2", "d3"})}
    report = constant_choose_on_folds(runs, {}, [["d1"], ["d2"], ["d3"]])
    # Without d1, value 2 wins; without d2 (or d3) the values tie and the smaller is taken.
    assert [fold["chosen"] for fold in report] == [2.0, 1.0, 1.0]
    # Each fold's value was chosen without it, and misses its follow-up: the figure says so.
    assert [fold["held_out_figures"]["all"]["citation_accuracy"] for fold in report] == [0, 0, 0]
    assert report[0]["train"]["citation_accuracy"] == 1.0


def test_a_constant_is_set_for_the_block_only():
    before = followups.MAX_CARRIED_TERMS
    with constant_set("MAX_CARRIED_TERMS", 3):
        assert followups.MAX_CARRIED_TERMS == 3
    assert before == followups.MAX_CARRIED_TERMS
    with pytest.raises(ValueError, match="no numeric constant"), constant_set("STOP_WORDS", 1):
        pass


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("NOPE=1,2", "no numeric constant 'NOPE'"),
        ("MAX_CARRIED_TERMS=", "give NAME=V1,V2"),
        ("MAX_CARRIED_TERMS=three", "could not convert"),
    ],
)
def test_the_command_refuses_an_unusable_try_before_touching_any_database(spec, message):
    with pytest.raises(CommandError, match=message):
        call_command("evaluate_followups", str(HELPDESK), "--try", spec)


def test_the_command_refuses_a_dataset_it_cannot_read(tmp_path):
    with pytest.raises(CommandError, match="not valid JSON"):
        (tmp_path / "bad.json").write_text("{")
        call_command("evaluate_followups", str(tmp_path / "bad.json"))
