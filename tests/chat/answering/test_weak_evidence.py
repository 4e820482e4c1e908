"""The weak-evidence notice (`docs/product.md §4`): the decision's third outcome at its
boundaries, the stored `Message.evidence`, the `sources` event over SSE (live and replayed) and
the WebSocket, the messages API, the page and the hover card, and the insights' count."""

from __future__ import annotations

import json
import uuid
from datetime import date

import pytest
from django.test import AsyncClient, Client
from django.urls import reverse

from chat.answering import evidence_signals
from chat.answering.evidence import WEAK_EVIDENCE_CARD, WEAK_EVIDENCE_NOTICE
from chat.answering.evidence_signals import (
    PASSAGE_MARGIN,
    WEAK_EVIDENCE_COEFFICIENTS,
    WEAK_EVIDENCE_INTERCEPT,
    WEAK_SUPPORT_MARGIN,
    WEAK_SUPPORT_SCORE,
    evidence_sufficient,
)
from chat.answering.features import QuestionFeatures
from chat.insights.period import Period
from chat.insights.selectors import exchanges_totals
from chat.models import Conversation, Message
from tests.support.clients import fragments_until_idle, send_payload, socket_for
from tests.support.conversations import exchange_create
from tests.support.insights import at, exchange_at

LEAVE_QUESTION = "How many days of annual leave do full-time employees get?"
THRESHOLD = 0.35


def features_scoring(score: float) -> QuestionFeatures:
    """Features whose fitted log-odds (`weak_evidence_score`) are `score`: only the passage's
    distance above the threshold varies, every other feature is neutral."""
    passage = (
        THRESHOLD
        + (score - WEAK_EVIDENCE_INTERCEPT) / WEAK_EVIDENCE_COEFFICIENTS["passage_above_threshold"]
    )
    return QuestionFeatures(
        best_similarity=THRESHOLD,
        passage_similarity=passage,
        best_sentence="",
        answer_type="",
        type_match=True,
        coverage=0.0,
        rarest_covered=False,
        chunk_coverage=0.0,
        ranks_agree=False,
        unknown_specific=0,
        unknown_share=0.0,
    )


def decide(score: float) -> tuple[bool, str]:
    features = features_scoring(score)
    assert features.passage_similarity >= THRESHOLD + PASSAGE_MARGIN  # steps 1-3 pass
    assert evidence_signals.weak_evidence_score(features, THRESHOLD) == pytest.approx(score)
    return evidence_sufficient(
        best_similarity=THRESHOLD,
        threshold=THRESHOLD,
        passage_similarity=features.passage_similarity,
        threshold_on="passage",
        features=features,
    )


def test_the_decision_refuses_flags_or_answers_at_the_band_s_boundaries():
    epsilon = 1e-6
    assert WEAK_SUPPORT_SCORE > 0
    assert decide(-epsilon) == (False, "weak-evidence")
    assert decide(epsilon) == (True, "weak-support")
    assert decide(WEAK_SUPPORT_SCORE - epsilon) == (True, "weak-support")
    assert decide(WEAK_SUPPORT_SCORE + epsilon) == (True, "sufficient")
    # Below the refusal steps, the band changes nothing.
    assert evidence_sufficient(
        best_similarity=THRESHOLD - 0.01,
        threshold=THRESHOLD,
        passage_similarity=THRESHOLD - 0.01,
        threshold_on="passage",
        features=features_scoring(WEAK_SUPPORT_SCORE / 2),
    ) == (False, "below-threshold")


def test_a_passage_short_of_the_band_s_margin_is_weak_whatever_the_log_odds():
    def at_passage(passage: float) -> tuple[bool, str]:
        features = QuestionFeatures(
            best_similarity=passage,
            passage_similarity=passage,
            best_sentence="",
            answer_type="",
            type_match=True,
            coverage=1.0,
            rarest_covered=True,
            chunk_coverage=1.0,
            ranks_agree=True,
            unknown_specific=0,
            unknown_share=0.0,
        )
        assert evidence_signals.weak_evidence_score(features, THRESHOLD) > WEAK_SUPPORT_SCORE
        return evidence_sufficient(
            best_similarity=passage,
            threshold=THRESHOLD,
            passage_similarity=passage,
            threshold_on="passage",
            features=features,
        )

    edge = THRESHOLD + WEAK_SUPPORT_MARGIN
    assert at_passage(edge - 0.001) == (True, "weak-support")
    assert at_passage(edge) == (True, "sufficient")


def test_the_band_moves_with_the_threshold():
    """The same question at a knowledge base's higher (automatic) threshold: its similarities
    stand closer to it, so its log-odds fall and the answer moves into the band."""
    features = features_scoring(WEAK_SUPPORT_SCORE + 0.2)
    higher = THRESHOLD + 0.2 / WEAK_EVIDENCE_COEFFICIENTS["passage_above_threshold"] + 0.01
    decision = evidence_sufficient(
        best_similarity=higher,
        threshold=higher,
        passage_similarity=features.passage_similarity,
        threshold_on="passage",
        features=features,
    )
    assert decision == (True, "weak-support")


@pytest.fixture
def band_everything(monkeypatch):
    """Every answer in the weak-support band (its upper edge above any log-odds)."""
    monkeypatch.setattr(evidence_signals, "WEAK_SUPPORT_SCORE", 1e9)


@pytest.fixture
def band_nothing(monkeypatch):
    monkeypatch.setattr(evidence_signals, "WEAK_SUPPORT_SCORE", 0.0)


async def sse_events(client: AsyncClient, message_id: str) -> dict[str, dict]:
    response = await client.post(
        "/api/chat",
        json.dumps({"message": LEAVE_QUESTION, "message_id": message_id}),
        "application/json",
    )
    assert response.status_code == 200
    body = b"".join([part async for part in response.streaming_content]).decode()
    events = {}
    for frame in filter(None, body.split("\n\n")):
        kind, data = frame.split("\n", 1)
        events[kind.removeprefix("event: ")] = json.loads(data.removeprefix("data: "))
    return events


@pytest.mark.django_db(transaction=True)
async def test_a_weak_answer_says_so_in_the_sources_event_the_stored_message_and_the_api(
    staff_user, policies_kb, band_everything
):
    client = AsyncClient()
    await client.aforce_login(staff_user)
    message_id = str(uuid.uuid4())

    events = await sse_events(client, message_id)

    assert events["sources"]["evidence"] == "weak" and events["sources"]["citations"]
    answer = await Message.objects.aget(pk=events["sources"]["message_id"])
    assert answer.status == Message.Status.COMPLETE and answer.evidence == "weak"
    # The same message_id again replays the stored answer, its verdict included.
    replayed = await sse_events(client, message_id)
    assert replayed["sources"] == events["sources"]
    messages = await client.get(f"/api/conversations/{answer.conversation_id}/messages")
    assert [m["evidence"] for m in messages.json()["messages"]] == ["", "weak"]


@pytest.mark.django_db(transaction=True)
async def test_a_strong_answer_says_strong(staff_user, policies_kb, band_nothing):
    client = AsyncClient()
    await client.aforce_login(staff_user)

    events = await sse_events(client, str(uuid.uuid4()))

    assert events["sources"]["evidence"] == "strong"
    answer = await Message.objects.aget(pk=events["sources"]["message_id"])
    assert answer.evidence == "strong"


@pytest.mark.django_db(transaction=True)
async def test_the_socket_shows_the_notice_with_the_sources_and_in_the_final_answer(
    staff_user, policies_kb, band_everything
):
    conversation_id = uuid.uuid4()
    communicator = await socket_for(staff_user, conversation_id)
    await communicator.send_to(text_data=send_payload(LEAVE_QUESTION))
    fragments = await fragments_until_idle(communicator)
    await communicator.disconnect()

    answer = await Message.objects.aget(conversation_id=conversation_id, role="assistant")
    assert answer.evidence == "weak"
    sources = next(f for f in fragments if f'id="msg-{answer.pk}-sources" hx-swap-oob="true"' in f)
    assert f'id="msg-{answer.pk}-evidence" hx-swap-oob="true"' in sources
    assert WEAK_EVIDENCE_NOTICE in sources
    final = [f for f in fragments if 'data-status="complete"' in f][-1]
    assert WEAK_EVIDENCE_NOTICE in final and WEAK_EVIDENCE_CARD in final


@pytest.mark.django_db
def test_the_page_shows_the_notice_above_a_weak_answer_and_on_its_hover_cards(
    staff_user, policies_kb
):
    conversation = Conversation.objects.create(owner=staff_user, title="Leave")
    chunk = policies_kb["handbook"].chunks.order_by("pk").first()
    _, weak = exchange_create(
        conversation, question="Leave?", answer="The closest passage. [1]", cited=[chunk]
    )
    _, strong = exchange_create(
        conversation, question="Leave again?", answer="A clear answer. [1]", cited=[chunk]
    )
    Message.objects.filter(pk=weak.pk).update(evidence=Message.Evidence.WEAK)
    Message.objects.filter(pk=strong.pk).update(evidence=Message.Evidence.STRONG)
    client = Client()
    client.force_login(staff_user)

    page = client.get(reverse("chat:conversation", args=[conversation.pk])).content.decode()

    weak_html = page.split(f'id="msg-{weak.pk}"', 1)[1].split(f'id="msg-{strong.pk}"', 1)[0]
    strong_html = page.split(f'id="msg-{strong.pk}"', 1)[1]
    notice = weak_html.index(WEAK_EVIDENCE_NOTICE)
    assert 'role="note"' in weak_html and notice < weak_html.index(f'id="msg-{weak.pk}-body"')
    # The hover card of the weak answer's citation carries the notice; the strong one's not.
    card = weak_html.split('role="tooltip"', 1)[1]
    assert card.index(WEAK_EVIDENCE_CARD) < card.index("</span></span></span>")
    assert WEAK_EVIDENCE_NOTICE not in strong_html and WEAK_EVIDENCE_CARD not in strong_html


@pytest.mark.django_db
def test_insights_count_the_answers_given_with_the_notice(staff_user, django_user_model):
    superuser = django_user_model.objects.create_superuser(username="root", password=None)
    conversation = Conversation.objects.create(owner=staff_user, title="Counted")
    day = date(2026, 3, 2)
    for hour, evidence in [(9, "weak"), (10, "weak"), (11, "strong"), (12, "")]:
        answer = exchange_at(conversation, when=at(day, hour), question=f"Question {hour}?")
        Message.objects.filter(pk=answer.pk).update(evidence=evidence)
    refused = exchange_at(
        conversation, when=at(day, 13), question="Refused?", status=Message.Status.REFUSED
    )
    Message.objects.filter(pk=refused.pk).update(evidence="weak")  # never counted as flagged

    totals = exchanges_totals(period=Period(first=day, last=day, by="day"))

    assert (totals.exchanges, totals.answered, totals.refused, totals.flagged) == (5, 4, 1, 2)
    client = Client()
    client.force_login(superuser)
    page = client.get(reverse("insights:index"), {"from": "2026-03-02", "to": "2026-03-02"})
    assert "2 with the weak-evidence notice" in page.content.decode()


@pytest.mark.django_db(transaction=True)
async def test_a_generative_answer_from_weak_evidence_gets_the_same_notice(
    staff_user, policies_kb, band_everything, settings
):
    from channels.db import database_sync_to_async

    from chat.answering import breaker
    from chat.answering.pipeline import answer_stream
    from chat.models import ChatSettings
    from tests.support.openai_server import Scripted, openai_server

    await database_sync_to_async(breaker.circuit_reset)()
    await ChatSettings.objects.aupdate_or_create(
        pk=1, defaults={"generation_mode": ChatSettings.Mode.GENERATIVE}
    )
    with openai_server() as server:
        settings.LLM_BACKEND = "openai"
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_MODEL = "test-model"
        settings.LLM_API_KEY = "test-key"
        settings.LLM_TIMEOUT_S = 5
        server.script(Scripted(pieces=["Full-time employees receive 25 days [1]."]))
        events = [
            event
            async for event in answer_stream(
                user=staff_user, question=LEAVE_QUESTION, message_id=uuid.uuid4()
            )
        ]

    sources = next(e for e in events if e.type == "sources")
    assert sources.data["evidence"] == "weak"
    answer = await Message.objects.aget(pk=sources.data["message_id"])
    assert (answer.mode, answer.evidence) == (Message.Mode.GENERATIVE, "weak")
