"""The OpenAI-compatible API when the language model fails (the generative mode against the
loopback OpenAI-protocol server of tests/support/openai_server.py): 503 in OpenAI's error shape
when no reply can start, and OpenAI's in-stream error frame when a reply breaks off."""

from __future__ import annotations

import json

import pytest
from django.test import AsyncClient

from accounts.services import api_token_create
from chat.answering import breaker
from chat.models import ChatSettings, Message
from tests.support.openai_server import Scripted, openai_server

pytestmark = pytest.mark.django_db(transaction=True)

LEAVE_QUESTION = "How many days of annual leave do full-time employees get?"


@pytest.fixture(autouse=True)
def _fresh_circuit(db):
    breaker.circuit_reset()
    yield
    breaker.circuit_reset()


@pytest.fixture
def llm_server(settings):
    with openai_server() as server:
        settings.LLM_BACKEND = "openai"
        settings.LLM_BASE_URL = server.base_url
        settings.LLM_MODEL = "test-model"
        settings.LLM_API_KEY = "test-key"
        settings.LLM_TIMEOUT_S = 5
        ChatSettings.objects.update_or_create(
            pk=1, defaults={"generation_mode": ChatSettings.Mode.GENERATIVE}
        )
        yield server


@pytest.fixture
def headers(staff_user) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_token_create(user=staff_user, name='t')[1]}"}


def completion(stream: bool) -> dict:
    return {
        "model": "sourced",
        "stream": stream,
        "messages": [{"role": "user", "content": LEAVE_QUESTION}],
    }


@pytest.mark.parametrize("stream", [False, True])
async def test_503_in_the_openai_shape_when_no_model_can_answer(
    llm_server, policies_kb, headers, stream
):
    llm_server.default = Scripted(status=503)
    response = await AsyncClient().post(
        "/v1/chat/completions",
        completion(stream),
        content_type="application/json",
        headers=headers,
    )
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["type"] == "service_unavailable" and error["code"] == "upstream-unavailable"


async def test_a_reply_breaking_off_ends_the_stream_with_an_error_frame(
    llm_server, policies_kb, headers
):
    llm_server.script(
        Scripted(pieces=["Full-time employees", " receive 25 days [1].", " Also"], drop_after=2)
    )
    response = await AsyncClient().post(
        "/v1/chat/completions", completion(True), content_type="application/json", headers=headers
    )
    assert response.status_code == 200
    body = b"".join([part async for part in response.streaming_content]).decode()
    frames = [frame.removeprefix("data: ") for frame in body.split("\n\n") if frame]
    assert frames[-1] == "[DONE]"
    error = json.loads(frames[-2])["error"]
    assert error["code"] == "upstream-unavailable" and error["type"] == "service_unavailable"
    assert "Full-time employees" in "".join(frames[:-2])
    answer = await Message.objects.aget(role=Message.Role.ASSISTANT)
    assert answer.status == Message.Status.ERROR and answer.content.startswith("Full-time")
