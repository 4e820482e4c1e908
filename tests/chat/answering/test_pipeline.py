"""The answering pipeline, run in-process: events, evidence check, persistence, idempotency,
interruption, regeneration. Real PostgreSQL, real embedding model."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import uuid

import pytest
from asgiref.sync import sync_to_async

from chat import selectors, services
from chat.answering.evidence import EMPTY_KB_MESSAGE, NO_EVIDENCE_MESSAGE
from chat.answering.evidence_signals import PASSAGE_MARGIN, WEAK_SUPPORT_MARGIN
from chat.answering.pipeline import AnswerOptions, answer_stream
from chat.citations import citation_as_dict
from chat.errors import AnswerError
from chat.models import ChatSettings, Citation, Conversation, Message
from knowledge import embedding
from knowledge.access import OPERATOR
from knowledge.models import Document
from tests.support.answers import assert_answer_is_grounded, collect, event_types
from tests.support.knowledge_base import chunks_replace, document_create, vector_at_cosine

pytestmark = pytest.mark.django_db(transaction=True)

LEAVE_QUESTION = "How many days of annual leave do full-time employees get?"


def answer_parts(events) -> tuple[str, list[dict]]:
    content = "".join(e.data["text"] for e in events if e.type == "answer_delta")
    sources = [e for e in events if e.type == "sources"]
    return content, (sources[0].data["citations"] if sources else [])


def stored(message_id) -> Message:
    return Message.objects.get(reply_to_id=message_id, role=Message.Role.ASSISTANT)


# --- A cited answer ------------------------------------------------------------------------------
async def test_an_extractive_answer_is_one_piece_unless_the_stream_is_paced(
    policies_kb, staff_user, settings
):
    """Produced whole, an extractive answer goes out as one delta (one frame, one event); with
    CHAT_STREAM_DELAY_MS it is paced in pieces of a few words, the same text."""
    settings.CHAT_STREAM_DELAY_MS = 0
    whole = await collect(user=staff_user, question=LEAVE_QUESTION)
    settings.CHAT_STREAM_DELAY_MS = 1
    paced = await collect(user=staff_user, question=LEAVE_QUESTION)

    whole_deltas = [e.data["text"] for e in whole if e.type == "answer_delta"]
    paced_deltas = [e.data["text"] for e in paced if e.type == "answer_delta"]
    assert len(whole_deltas) == 1 and len(paced_deltas) > 2
    assert whole_deltas[0] == "".join(paced_deltas)
    assert "25 days of paid annual leave" in whole_deltas[0] and " [1]" in whole_deltas[0]


async def test_answer_events_come_in_order_with_citations_matching_the_markers(
    policies_kb, staff_user
):
    events = await collect(user=staff_user, question=LEAVE_QUESTION)

    types = event_types(events)
    assert types[0] == "answer_start"
    assert types[-2:] == ["sources", "answer_end"]
    assert set(types[1:-2]) == {"answer_delta"}
    content, citations = answer_parts(events)
    assert_answer_is_grounded(content, citations)
    assert "25 days of paid annual leave" in content
    handbook = policies_kb["handbook"]
    assert any(c["document_id"] == handbook.pk and c["page"] == 3 for c in citations)
    assert {"n", "chunk_id", "document_id", "title", "page", "section", "url", "excerpt"} <= set(
        citations[0]
    )
    assert events[-1].data == {"message_id": events[0].data["message_id"], "status": "complete"}


async def test_answer_is_stored_with_exactly_the_cited_chunks(policies_kb, staff_user):
    message_id = uuid.uuid4()
    events = await collect(user=staff_user, question=LEAVE_QUESTION, message_id=message_id)
    content, citations = answer_parts(events)

    answer = await sync_to_async(stored)(message_id)
    assert answer.status == Message.Status.COMPLETE and answer.content == content
    assert answer.mode == Message.Mode.EXTRACTIVE and answer.top_k == 5
    assert answer.first_event_ms is not None and answer.total_ms >= answer.first_event_ms
    rows = await sync_to_async(list)(answer.citations.order_by("n"))
    assert [(c.n, c.chunk_id) for c in rows] == [(c["n"], c["chunk_id"]) for c in citations]
    source_chunks = await sync_to_async(list)(answer.source_chunks.values_list("pk", flat=True))
    assert sorted(source_chunks) == sorted(c["chunk_id"] for c in citations)


async def test_answer_is_deterministic(policies_kb, staff_user):
    first = await collect(user=staff_user, question="What is the daily meal allowance?")
    second = await collect(user=staff_user, question="What is the daily meal allowance?")
    assert answer_parts(first)[0] == answer_parts(second)[0]


async def test_disabled_document_is_never_cited(policies_kb, staff_user):
    """The leave question is answered from the handbook alone: enabled, it is cited; disabled,
    nothing else holds the answer and the question is refused."""
    handbook = policies_kb["handbook"]
    _, citations = answer_parts(await collect(user=staff_user, question=LEAVE_QUESTION))
    assert citations and {c["document_id"] for c in citations} == {handbook.pk}

    await Document.objects.filter(pk=handbook.pk).aupdate(enabled=False)
    events = await collect(user=staff_user, question=LEAVE_QUESTION)
    assert event_types(events) == ["refusal"]
    assert events[0].data["message"] == NO_EVIDENCE_MESSAGE


async def test_document_filter_limits_the_sources(policies_kb, staff_user):
    expenses = policies_kb["expenses"]
    events = await collect(
        user=staff_user,
        question="How many days of leave and what meal allowance do I get?",
        options=AnswerOptions(document_ids=[expenses.pk]),
    )
    _, citations = answer_parts(events)
    assert citations and {c["document_id"] for c in citations} == {expenses.pk}


async def test_unknown_document_ids_are_not_found(policies_kb, staff_user):
    with pytest.raises(AnswerError) as error:
        await collect(user=staff_user, question="Hi?", options=AnswerOptions(document_ids=[999999]))
    assert error.value.status == 404 and "999999" in error.value.message
    assert error.value.details == {"document_ids": ["Unknown document ids: 999999."]}


# --- Refusals ------------------------------------------------------------------------------------
async def test_unrelated_question_is_refused_with_the_exact_text_and_suggestions(
    policies_kb, staff_user
):
    message_id = uuid.uuid4()
    events = await collect(
        user=staff_user,
        question="Who won the football world cup in 1966?",
        message_id=message_id,
    )
    assert event_types(events) == ["refusal"]
    assert events[0].data["message"] == NO_EVIDENCE_MESSAGE
    assert events[0].data["suggestions"] == ["Contact support", "Rephrase your question"]
    answer = await sync_to_async(stored)(message_id)
    assert answer.status == Message.Status.REFUSED and answer.content == NO_EVIDENCE_MESSAGE
    assert await answer.citations.acount() == 0


async def test_empty_knowledge_base_is_refused(db, staff_user):
    events = await collect(user=staff_user, question=LEAVE_QUESTION)
    assert event_types(events) == ["refusal"]
    assert events[0].data["message"] == EMPTY_KB_MESSAGE
    assert events[0].data["message"] == "The knowledge base is empty. Please contact an admin."


async def test_knowledge_base_of_only_disabled_documents_counts_as_empty(policies_kb, staff_user):
    await Document.objects.aupdate(enabled=False)
    events = await collect(user=staff_user, question=LEAVE_QUESTION)
    assert events[0].data["message"] == EMPTY_KB_MESSAGE


OFFICE_SENTENCE = "The office opens at eight in the morning on weekdays."
OFFICE_QUESTION = "When does the office open?"


@pytest.fixture
def vector_kb(db):
    """One-sentence chunks embedded by the real model: a question vector built at a chosen
    cosine to the office sentence's own vector has exactly that similarity to the chunk and to
    its sentence, so the best passage the evidence check sees is known."""
    document_create(
        title="Vectors",
        texts=[OFFICE_SENTENCE, "The canteen serves lunch from noon until two."],
    )
    return embedding.embed_texts([OFFICE_SENTENCE])[0]


T = 0.35


@pytest.mark.parametrize(
    ("cosine", "reason"),
    [
        (T - 0.01, "below-threshold"),
        (T + PASSAGE_MARGIN - 0.01, "no-close-passage"),
        (T + PASSAGE_MARGIN + 0.01, "weak-support"),  # answered with the weak-evidence notice
        (T + WEAK_SUPPORT_MARGIN + 0.2, "sufficient"),
    ],
    ids=str,
)
async def test_evidence_boundaries_around_the_default_threshold(
    vector_kb, staff_user, cosine, reason, caplog
):
    question_vector = vector_at_cosine(vector_kb, cosine, away_axis=7)
    with caplog.at_level(logging.INFO, logger="sourced.exchange"):
        events = await collect(
            user=staff_user,
            question="When does the office open?",
            options=AnswerOptions(embedding=question_vector),
        )
    logged = json.loads(caplog.records[-1].getMessage())
    assert logged["evidence"] == reason
    answered = reason in ("sufficient", "weak-support")
    assert (events[0].type == "refusal") is not answered
    if answered:
        sources = next(e for e in events if e.type == "sources")
        assert sources.data["evidence"] == ("weak" if reason == "weak-support" else "strong")
        content, citations = answer_parts(events)
        assert [c["similarity"] for c in citations] == [pytest.approx(cosine, abs=1e-5)]
        assert content == f"{OFFICE_SENTENCE} [1]"
    else:
        assert events[0].data["message"] == NO_EVIDENCE_MESSAGE


async def test_threshold_comes_from_chat_settings_and_the_environment_overrides_it(
    vector_kb, staff_user, settings
):
    # Clear of the default threshold's margin (0.35 + 0.09), short of a 0.5 threshold's. A
    # question with words of its own: with none ("When?") the fitted veto
    # (docs/decisions/0021-evidence-fitted-veto.md) has only the similarity to go on and
    # refuses 0.1 above the threshold.
    question_vector = vector_at_cosine(vector_kb, 0.5, away_axis=7)
    await ChatSettings.objects.aupdate_or_create(pk=1, defaults={"evidence_threshold": 0.5})
    events = await collect(
        user=staff_user, question=OFFICE_QUESTION, options=AnswerOptions(embedding=question_vector)
    )
    assert events[0].type == "refusal"
    settings.CHAT_EVIDENCE_THRESHOLD = "0.4"
    events = await collect(
        user=staff_user, question=OFFICE_QUESTION, options=AnswerOptions(embedding=question_vector)
    )
    assert events[0].type == "answer_start"


async def test_the_automatic_threshold_is_used_when_the_admin_chooses_it(
    vector_kb, staff_user, settings
):
    """The knowledge base's measured threshold replaces the admin's when ticked
    (docs/decisions/0027-evidence-calibration-per-knowledge-base.md)."""
    from chat.models import EvidenceCalibration

    question_vector = vector_at_cosine(vector_kb, 0.5, away_axis=7)
    options = AnswerOptions(embedding=question_vector)
    await EvidenceCalibration.objects.acreate(
        pk=1, fingerprint="x", noise_floor=0.6, probe_floor=0.7, threshold=0.6
    )
    # The admin's 0.35 answers; the automatic 0.6 is not used until chosen.
    events = await collect(user=staff_user, question=OFFICE_QUESTION, options=options)
    assert events[0].type == "answer_start"
    await ChatSettings.objects.aupdate_or_create(
        pk=1, defaults={"evidence_threshold_automatic": True}
    )
    events = await collect(user=staff_user, question=OFFICE_QUESTION, options=options)
    assert events[0].type == "refusal"
    # Never measured: the admin's value stands.
    await EvidenceCalibration.objects.all().adelete()
    events = await collect(user=staff_user, question=OFFICE_QUESTION, options=options)
    assert events[0].type == "answer_start"


# --- Input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("top_k", [0, 21, -1, True])
async def test_top_k_outside_1_to_20_is_a_validation_error(policies_kb, staff_user, top_k):
    with pytest.raises(AnswerError) as error:
        await collect(user=staff_user, question="Leave?", options=AnswerOptions(top_k=top_k))
    assert error.value.status == 422 and "top_k" in error.value.details


@pytest.mark.parametrize(
    "embedding", [[0.1] * 383, [0.0] * 384, [float("nan")] + [0.1] * 383, ["x"] * 384]
)
async def test_bad_embedding_is_a_validation_error(policies_kb, staff_user, embedding):
    with pytest.raises(AnswerError) as error:
        await collect(
            user=staff_user, question="Leave?", options=AnswerOptions(embedding=embedding)
        )
    assert error.value.status == 422 and "embedding" in error.value.details


async def test_too_long_message_is_rejected_and_nothing_is_stored(db, staff_user, settings):
    settings.CHAT_MAX_MESSAGE_CHARS = 50
    with pytest.raises(AnswerError) as error:
        await collect(user=staff_user, question="word " * 20)
    assert error.value.status == 422
    assert await Message.objects.acount() == 0


async def test_malformed_message_id_is_a_bad_request(db, staff_user):
    with pytest.raises(AnswerError) as error:
        await collect(user=staff_user, question="Leave?", message_id="not-a-uuid")
    assert error.value.status == 400


async def test_question_longer_than_the_model_reads_is_answered_with_a_warning(
    policies_kb, staff_user
):
    question = LEAVE_QUESTION + " " + "Please explain it in detail. " * 60
    message_id = uuid.uuid4()
    events = await collect(user=staff_user, question=question, message_id=message_id)
    assert events[0].type == "warning" and "only its beginning" in events[0].data["message"]
    assert events[1].type in ("answer_start", "refusal")
    answer = await sync_to_async(stored)(message_id)
    assert answer.warning == events[0].data["message"]


# --- Conversations -------------------------------------------------------------------------------
async def test_first_message_creates_the_conversation_with_privacy_and_title(
    policies_kb, staff_user
):
    events = await collect(user=staff_user, question="Refund?", is_private=True)
    conversation = await Conversation.objects.aget(pk=events[0].data["conversation_id"])
    assert conversation.owner_id == staff_user.pk and conversation.is_private
    assert conversation.title == "Refund?"
    # Privacy is only chosen at creation.
    await collect(
        user=staff_user, question=LEAVE_QUESTION, conversation_id=conversation.pk, is_private=False
    )
    await conversation.arefresh_from_db()
    assert conversation.is_private and await conversation.messages.acount() == 4


async def test_client_may_choose_the_id_of_a_new_conversation(policies_kb, staff_user):
    conversation_id = uuid.uuid4()
    events = await collect(user=staff_user, question="Refund?", conversation_id=conversation_id)
    assert events[0].data["conversation_id"] == str(conversation_id)


async def test_only_the_owner_posts_to_a_conversation(policies_kb, staff_user, other_staff_user):
    events = await collect(user=staff_user, question=LEAVE_QUESTION)
    conversation_id = events[0].data["conversation_id"]
    with pytest.raises(AnswerError) as error:
        await collect(user=other_staff_user, question="And?", conversation_id=conversation_id)
    assert error.value.status == 403


# --- Idempotency ---------------------------------------------------------------------------------
async def test_same_message_id_twice_answers_once_and_replays_the_stored_answer(
    policies_kb, staff_user
):
    message_id = uuid.uuid4()
    first = await collect(user=staff_user, question=LEAVE_QUESTION, message_id=message_id)
    second = await collect(user=staff_user, question=LEAVE_QUESTION, message_id=message_id)

    assert event_types(second) == ["answer_start", "answer_delta", "sources", "answer_end"]
    assert second[0].data == first[0].data
    assert answer_parts(second) == answer_parts(first)
    assert second[-1].data == first[-1].data
    assert await Message.objects.acount() == 2
    assert await Conversation.objects.acount() == 1


async def test_same_message_id_twice_replays_a_refusal(policies_kb, staff_user):
    message_id = uuid.uuid4()
    question = "Who won the football world cup in 1966?"
    first = await collect(user=staff_user, question=question, message_id=message_id)
    second = await collect(user=staff_user, question=question, message_id=message_id)
    assert [e.as_dict() for e in second] == [e.as_dict() for e in first]


async def test_same_message_id_concurrently_answers_once(policies_kb, staff_user, settings):
    settings.CHAT_STREAM_DELAY_MS = 20
    message_id = uuid.uuid4()
    first, second = await asyncio.gather(
        collect(user=staff_user, question=LEAVE_QUESTION, message_id=message_id),
        collect(user=staff_user, question=LEAVE_QUESTION, message_id=message_id),
    )
    assert answer_parts(first) == answer_parts(second)
    assert await Message.objects.acount() == 2
    assert await Conversation.objects.acount() == 1


async def test_message_id_reused_for_another_text_or_user_is_a_conflict(
    policies_kb, staff_user, other_staff_user
):
    message_id = uuid.uuid4()
    await collect(user=staff_user, question=LEAVE_QUESTION, message_id=message_id)
    with pytest.raises(AnswerError) as error:
        await collect(user=staff_user, question="Something else?", message_id=message_id)
    assert error.value.status == 409
    with pytest.raises(AnswerError) as error:
        await collect(user=other_staff_user, question=LEAVE_QUESTION, message_id=message_id)
    assert error.value.status == 409


def test_concurrent_first_messages_with_one_id_create_one_conversation_and_one_answer(
    staff_user,
):
    """Two connections race on the database: one INSERT wins, the other reads its result."""
    message_id = uuid.uuid4()
    barrier = threading.Barrier(2)
    outcomes: list = []

    def begin():
        from django.db import connection

        barrier.wait()
        try:
            outcomes.append(
                services.exchange_begin(
                    user=staff_user,
                    message_id=message_id,
                    question="Refund?",
                    conversation_id=None,
                    is_private=False,
                    mode="extractive",
                    top_k=5,
                )
            )
        finally:
            connection.close()

    threads = [threading.Thread(target=begin) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kinds = sorted(type(outcome).__name__ for outcome in outcomes)
    assert kinds == ["ExchangeClaim", "ExchangeExisting"]
    assert Conversation.objects.count() == 1
    assert Message.objects.filter(role=Message.Role.USER).count() == 1
    assert Message.objects.filter(role=Message.Role.ASSISTANT).count() == 1


def test_database_allows_one_answer_per_question(staff_user):
    from django.db import IntegrityError

    claim = services.exchange_begin(
        user=staff_user,
        message_id=uuid.uuid4(),
        question="Refund?",
        conversation_id=None,
        is_private=False,
        mode="extractive",
        top_k=5,
    )
    with pytest.raises(IntegrityError):
        Message.objects.create(
            conversation=claim.conversation, role=Message.Role.ASSISTANT, reply_to=claim.question
        )


# --- Interruption and regeneration ---------------------------------------------------------------
async def test_cancelling_the_consumer_mid_stream_stores_the_partial_answer_as_interrupted(
    policies_kb, staff_user, settings
):
    settings.CHAT_STREAM_DELAY_MS = 300
    message_id = uuid.uuid4()
    received = []

    async def consume():
        async for event in answer_stream(
            user=staff_user, question=LEAVE_QUESTION, message_id=message_id
        ):
            received.append(event)

    task = asyncio.create_task(consume())
    while not any(event.type == "answer_delta" for event in received):
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    answer = await sync_to_async(stored)(message_id)
    assert answer.status == Message.Status.INTERRUPTED
    assert answer.content == "".join(e.data["text"] for e in received if e.type == "answer_delta")
    assert answer.content and "[" not in answer.content
    assert await answer.citations.acount() == 0  # no marker was sent yet


async def test_cancelling_before_the_first_event_leaves_no_answer_streaming(
    policies_kb, staff_user
):
    message_id = uuid.uuid4()

    async def consume():
        async for _event in answer_stream(
            user=staff_user, question=LEAVE_QUESTION, message_id=message_id
        ):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0)  # the exchange is being stored
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    answer = await sync_to_async(stored)(message_id)
    assert answer.status == Message.Status.INTERRUPTED and answer.content == ""
    # A retry now gets the stored (empty, interrupted) answer at once, not a 409 later.
    replay = await collect(user=staff_user, question=LEAVE_QUESTION, message_id=message_id)
    assert replay[-1].data["status"] == "interrupted"


async def test_an_extractive_answer_is_written_on_the_hop_that_records_what_it_was_given(
    policies_kb, staff_user, monkeypatch
):
    """What the extractive answer was given is recorded first, then the answer is written, on
    the same thread (one thread hop for both), before anything of it is sent."""
    from chat.answering import answerers

    calls: list[tuple[str, int]] = []
    write = answerers.extractive_answer

    def written(**kwargs):
        calls.append(("written", threading.get_ident()))
        return write(**kwargs)

    record = services.answer_given_record

    def recorded(**kwargs):
        calls.append(("recorded", threading.get_ident()))
        return record(**kwargs)

    monkeypatch.setattr(answerers, "_extractive_answer_counted", written)
    monkeypatch.setattr(services, "answer_given_record", recorded)
    events = await collect(user=staff_user, question=LEAVE_QUESTION)
    assert [name for name, _ in calls] == ["recorded", "written"]
    assert calls[0][1] == calls[1][1] != threading.get_ident()
    assert events[-1].type == "answer_end"


async def test_a_search_plan_that_fails_on_the_stores_hop_ends_the_answer_as_an_error(
    policies_kb, staff_user, monkeypatch
):
    """The search is planned on the store's thread hop; a plan that fails there fails the
    answer as any later step would (an `error` event, the answer stored as `error`), never
    leaving it `streaming`."""
    from chat.answering import search

    def broken(*args, **kwargs):
        raise RuntimeError("the names index is broken")

    monkeypatch.setattr(search, "named_documents_find", broken)
    message_id = uuid.uuid4()
    events = await collect(user=staff_user, question=LEAVE_QUESTION, message_id=message_id)
    assert [e.type for e in events] == ["error"] and events[0].data["code"] == "internal"
    answer = await sync_to_async(stored)(message_id)
    assert answer.status == Message.Status.ERROR


async def test_closing_the_stream_early_stores_what_was_sent_as_interrupted(
    policies_kb, staff_user, settings
):
    settings.CHAT_STREAM_DELAY_MS = 1  # paced: the answer goes out in pieces
    message_id = uuid.uuid4()
    stream = answer_stream(user=staff_user, question=LEAVE_QUESTION, message_id=message_id)
    sent = []
    async for event in stream:
        if event.type == "answer_delta":
            sent.append(event.data["text"])
            if event.data["text"].startswith(" ["):
                break
    await stream.aclose()
    answer = await sync_to_async(stored)(message_id)
    assert answer.status == Message.Status.INTERRUPTED and answer.content == "".join(sent)
    assert await answer.citations.acount() == 1  # the one marker that was sent


async def test_replaying_an_interrupted_answer_returns_the_partial_answer(policies_kb, staff_user):
    message_id = uuid.uuid4()
    stream = answer_stream(user=staff_user, question=LEAVE_QUESTION, message_id=message_id)
    async for event in stream:
        if event.type == "answer_delta":
            break
    await stream.aclose()
    replay = await collect(user=staff_user, question=LEAVE_QUESTION, message_id=message_id)
    assert replay[-1].data["status"] == "interrupted"
    assert answer_parts(replay)[0] == event.data["text"]


async def test_regenerate_replaces_the_answer(policies_kb, staff_user, other_staff_user):
    message_id = uuid.uuid4()
    stream = answer_stream(user=staff_user, question=LEAVE_QUESTION, message_id=message_id)
    async for _event in stream:
        break
    await stream.aclose()
    first_answer = await sync_to_async(stored)(message_id)

    with pytest.raises(AnswerError) as error:
        await collect(
            user=other_staff_user,
            question=None,
            message_id=message_id,
            options=AnswerOptions(regenerate=True),
        )
    assert error.value.status == 403

    events = await collect(
        user=staff_user,
        question=None,
        message_id=message_id,
        options=AnswerOptions(regenerate=True),
    )
    assert events[-1].data["status"] == "complete"
    answer = await sync_to_async(stored)(message_id)
    assert answer.pk != first_answer.pk and answer.status == Message.Status.COMPLETE
    assert not await Message.objects.filter(pk=first_answer.pk).aexists()


async def test_regenerating_an_unknown_question_is_not_found(db, staff_user):
    with pytest.raises(AnswerError) as error:
        await collect(user=staff_user, question=None, options=AnswerOptions(regenerate=True))
    assert error.value.status == 404


# --- Reload --------------------------------------------------------------------------------------
def reload_citations(conversation_id: str) -> list[dict]:
    conversation = Conversation.objects.get(pk=conversation_id)
    answers = [m for m in selectors.conversation_messages(conversation) if m.role == "assistant"]
    return [citation_as_dict(c) for c in answers[-1].citations.all()]


def without_stale(citations: list[dict]) -> list[dict]:
    return [{k: v for k, v in c.items() if k != "stale"} for c in citations]


async def test_reload_returns_identical_citations_after_reingest_and_after_deletion(
    policies_kb, staff_user
):
    events = await collect(user=staff_user, question=LEAVE_QUESTION)
    conversation_id = events[0].data["conversation_id"]
    _, streamed = answer_parts(events)

    reloaded = await sync_to_async(reload_citations)(conversation_id)
    assert reloaded == streamed

    handbook = policies_kb["handbook"]
    await sync_to_async(chunks_replace)(
        handbook, texts=["Annual leave is now 30 days.", "Carry-over is abolished."]
    )
    after_reingest = await sync_to_async(reload_citations)(conversation_id)
    assert without_stale(after_reingest) == without_stale(streamed)
    handbook_cited = [c for c in after_reingest if c["document_id"] == handbook.pk]
    assert handbook_cited and all(c["stale"] for c in handbook_cited)

    await handbook.adelete()
    after_delete = await sync_to_async(reload_citations)(conversation_id)
    assert without_stale(after_delete) == without_stale(streamed)
    assert after_delete and all(c["stale"] for c in after_delete)
    assert await Citation.objects.filter(chunk__isnull=True).acount() == len(streamed)


def test_conversation_messages_take_a_constant_number_of_queries(
    policies_kb, staff_user, django_assert_max_num_queries
):
    from asgiref.sync import async_to_sync

    conversation_id = uuid.uuid4()
    for question in (LEAVE_QUESTION, "What is the daily meal allowance?", "Password length?"):
        async_to_sync(collect)(user=staff_user, question=question, conversation_id=conversation_id)
    conversation = Conversation.objects.get(pk=conversation_id)
    with django_assert_max_num_queries(2):
        messages = selectors.conversation_messages(conversation)
        for message in messages:
            [citation_as_dict(c) for c in message.citations.all()]
    assert len(messages) == 6


# --- Logging -------------------------------------------------------------------------------------
async def test_one_structured_log_line_per_exchange(policies_kb, staff_user, caplog):
    caplog.set_level(logging.INFO, logger="sourced.exchange")
    await collect(user=staff_user, question=LEAVE_QUESTION)
    await collect(user=staff_user, question="Who won the football world cup in 1966?")
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "sourced.exchange"]
    assert len(lines) == 2
    answered, refused = lines
    for line in lines:
        assert {
            "conversation", "user", "top_k", "retrieval_ms", "best_similarity", "refused",
            "first_event_ms", "total_ms", "citations",
        } <= set(line)  # fmt: skip
        assert line["user"] == staff_user.pk and line["top_k"] == 5
    assert answered["refused"] is False and answered["citations"] >= 1
    assert (
        answered["best_similarity"] >= 0.35 and answered["total_ms"] >= answered["first_event_ms"]
    )
    assert refused["refused"] is True and refused["citations"] == 0


async def test_no_log_line_holds_the_question_or_the_answer_unless_asked(
    policies_kb, staff_user, caplog, settings
):
    """The question and its search query are personal data: no logger, at any level, writes
    them (nor the answer's text) unless CHAT_LOG_QUERIES is on; then the exchange's line holds
    the query."""
    caplog.set_level(logging.DEBUG)
    events = await collect(user=staff_user, question=LEAVE_QUESTION)
    content, _ = answer_parts(events)
    await collect(user=staff_user, question="Who won the football world cup in 1966?")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert '"event": "chat.exchange"' in logged  # the exchange lines were captured
    for text in (LEAVE_QUESTION, "football world cup", content.split(" [")[0]):
        assert text not in logged, text
    assert "search_query" not in logged

    caplog.clear()
    settings.CHAT_LOG_QUERIES = True
    await collect(user=staff_user, question=LEAVE_QUESTION)
    (line,) = [json.loads(r.getMessage()) for r in caplog.records if r.name == "sourced.exchange"]
    assert line["search_query"] == LEAVE_QUESTION


async def test_citations_survive_a_real_reingestion_of_the_changed_file(staff_user, tmp_path):
    from knowledge.services import document_ingest

    path = tmp_path / "leave-policy.md"
    path.write_text(
        "# Leave policy\n\n## Annual leave\n\nFull-time employees receive 25 days of paid annual "
        "leave per calendar year. Leave requests go through the HR portal.\n",
        encoding="utf-8",
    )
    first = await sync_to_async(document_ingest)(path=path)
    assert first.action == "new"
    events = await collect(user=staff_user, question=LEAVE_QUESTION)
    _, streamed = answer_parts(events)
    assert streamed and streamed[0]["section"] and "25 days" in streamed[0]["text"]

    path.write_text(
        "# Leave policy\n\n## Annual leave\n\nFull-time employees receive 30 days of paid annual "
        "leave per calendar year.\n",
        encoding="utf-8",
    )
    second = await sync_to_async(document_ingest)(path=path)
    assert second.action == "updated"
    reloaded = await sync_to_async(reload_citations)(events[0].data["conversation_id"])
    assert without_stale(reloaded) == without_stale(streamed)
    assert all(c["stale"] for c in reloaded) and "25 days" in reloaded[0]["text"]


def test_finishing_an_answer_stores_its_citations_once_and_keeps_a_deleted_chunks_snapshot(
    policies_kb, staff_user
):
    from knowledge.models import Chunk
    from knowledge.retrieval import chunks_search

    begun = services.exchange_begin(
        user=staff_user, message_id=uuid.uuid4(), question=LEAVE_QUESTION,
        conversation_id=None, is_private=False, mode="extractive", top_k=5,
    )  # fmt: skip
    conversation_updated = Conversation.objects.get(pk=begun.conversation.pk).updated_at
    found = chunks_search(reader=OPERATOR, query=LEAVE_QUESTION, top_k=2).chunks
    assert len(found) == 2
    Chunk.objects.filter(pk=found[1].chunk_id).delete()  # deleted while the answer streamed

    stored = services.answer_finish(
        answer_id=begun.answer.pk, status=Message.Status.COMPLETE, content="Text [1] [2]",
        cited=[(1, found[0]), (2, found[1])], suggestions=["a"],
    )  # fmt: skip

    assert [(c.n, c.chunk_id) for c in stored] == [(1, found[0].chunk_id), (2, None)]
    rows = list(Citation.objects.filter(message_id=begun.answer.pk).order_by("n"))
    assert [(c.n, c.chunk_id, c.chunk_id_snapshot) for c in rows] == [
        (1, found[0].chunk_id, found[0].chunk_id),
        (2, None, found[1].chunk_id),
    ]
    assert rows[1].text == found[1].text and rows[1].document_title == found[1].document_title
    answer = Message.objects.get(pk=begun.answer.pk)
    assert (answer.status, answer.content, answer.suggestions) == (
        "complete",
        "Text [1] [2]",
        ["a"],
    )
    assert Conversation.objects.get(pk=begun.conversation.pk).updated_at > conversation_updated

    # Finished already: a late interruption changes nothing and adds no citation.
    late = services.answer_finish(
        answer_id=begun.answer.pk, status=Message.Status.INTERRUPTED, content="",
        cited=[(1, found[0])],
    )  # fmt: skip
    assert late is None
    assert Citation.objects.filter(message_id=begun.answer.pk).count() == 2
    assert Message.objects.get(pk=begun.answer.pk).status == "complete"
