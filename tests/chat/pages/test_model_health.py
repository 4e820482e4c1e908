"""The chat page's model-health dot in the generative mode (`chat.answering.generative.
model_health`): from the configuration and the circuit breaker, never a request to the model."""

from __future__ import annotations

import pytest
from django.test import Client

from chat.answering import breaker
from chat.models import ChatSettings

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_circuit(db):
    breaker.circuit_reset()
    yield
    breaker.circuit_reset()


@pytest.fixture
def configured(settings):
    settings.LLM_BACKEND = "openai"
    settings.LLM_BASE_URL = "http://127.0.0.1:9/v1"  # never contacted
    settings.LLM_MODEL = "test-model"
    settings.LLM_API_KEY = "test-key"
    settings.LLM_CIRCUIT_FAILURES = 5


def _dot(client: Client) -> str | None:
    page = client.get("/").content.decode()
    if "data-model-health=" not in page:
        return None
    return page.split('data-model-health="', 1)[1].split('"', 1)[0]


def _mode(mode: str) -> None:
    ChatSettings.objects.update_or_create(pk=1, defaults={"generation_mode": mode})


def test_the_dot_follows_the_breaker_ready_degraded_down(staff_user, configured):
    client = Client()
    client.force_login(staff_user)
    _mode(ChatSettings.Mode.EXTRACTIVE)
    assert _dot(client) is None  # the extractive mode uses no model: no dot
    _mode(ChatSettings.Mode.GENERATIVE)
    assert _dot(client) == "ready"
    breaker.llm_failure_record("timed out")
    page = client.get("/").content.decode()
    assert _dot(client) == "degraded" and "failed 1 time lately" in page
    for _ in range(4):
        breaker.llm_failure_record("timed out")
    assert breaker.circuit_is_open() and _dot(client) == "down"
    breaker.circuit_reset()
    assert _dot(client) == "ready"


def test_the_dot_is_down_without_a_configured_model(staff_user, settings):
    settings.LLM_BACKEND = "openai"
    settings.LLM_BASE_URL = ""
    client = Client()
    client.force_login(staff_user)
    _mode(ChatSettings.Mode.GENERATIVE)
    assert _dot(client) == "down"
    assert "No language model is configured" in client.get("/").content.decode()
