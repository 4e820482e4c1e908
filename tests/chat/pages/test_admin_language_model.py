"""The chat settings admin page: the generative mode's model, configured or not, reachable or
not, its last error; choosing generative without one warns."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chat.answering import breaker
from chat.models import ChatSettings
from tests.support.openai_server import openai_server

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_circuit(db):
    breaker.circuit_reset()
    yield
    breaker.circuit_reset()


def settings_page(admin_client) -> str:
    ChatSettings.objects.get_or_create(pk=1)
    response = admin_client.get(reverse("admin:chat_chatsettings_change", args=[1]))
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_shows_a_reachable_server_and_its_model(admin_client, settings):
    with openai_server() as server:
        settings.LLM_BACKEND, settings.LLM_BASE_URL = "openai", server.base_url
        settings.LLM_MODEL = "llama3.2:1b"
        page = settings_page(admin_client)
        assert [r.path for r in server.requests] == ["/v1/models"]
    assert "llama3.2:1b" in page and "Reachable." in page


def test_the_page_shows_an_unreachable_server_and_the_last_error(admin_client, settings):
    with openai_server() as server:
        url = server.base_url  # closed when the block ends: nothing listens there any more
    settings.LLM_BACKEND, settings.LLM_BASE_URL, settings.LLM_MODEL = "openai", url, "m"
    breaker.llm_failure_record("HTTP 500: <b>boom</b>")
    page = settings_page(admin_client)
    assert "Not reachable:" in page and "cannot connect" in page
    assert "Last error: HTTP 500: &lt;b&gt;boom&lt;/b&gt;" in page


def test_choosing_generative_without_a_backend_warns(admin_client, settings):
    settings.LLM_BACKEND, settings.LLM_BASE_URL, settings.LLM_MODEL = "openai", "", ""
    ChatSettings.objects.get_or_create(pk=1)
    url = reverse("admin:chat_chatsettings_change", args=[1])
    response = admin_client.post(
        url,
        {
            "generation_mode": "generative",
            "evidence_threshold": "0.35",
            "default_top_k": "5",
            "max_history_turns": "6",
        },
        follow=True,
    )
    assert response.status_code == 200
    page = response.content.decode()
    assert ChatSettings.objects.get(pk=1).generation_mode == "generative"
    assert "no language model is configured" in page
    assert "Not configured." in page and "LLM_BASE_URL" in page
