"""A language model run in this process with transformers: `LLM_BACKEND=local`,
`LLM_MODEL_PATH` = a transformers model folder or a `.gguf` file (dequantised by transformers
through the `gguf` package). Nothing is downloaded: only local files are read.

The model is loaded once per path, lazily — on the first generative answer, in a worker thread
— and kept for the process. A reply is generated in a thread of its own and streamed through
transformers' `TextIteratorStreamer`; closing the reply stops the generation at the next token.
Decoding is greedy (the low temperature of the other backend, made exact), with a mild
repetition penalty, which small models need.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings

from chat.answering.llm.base import ChatMessage, LLMBackend, LLMStreamBroken, LLMUnavailable, Reply

logger = logging.getLogger(__name__)
REPETITION_PENALTY = 1.1

_loaded: dict[str, tuple[Any, Any]] = {}
_load_lock = threading.Lock()


def model_load(path: str) -> tuple[Any, Any]:
    """(model, tokenizer) of `path`, loaded on the first call (blocking; thread-safe)."""
    with _load_lock:
        if path in _loaded:
            return _loaded[path]
        from transformers import AutoModelForCausalLM, AutoTokenizer

        location = Path(path)
        options: dict[str, Any] = {"local_files_only": True}
        if location.suffix.lower() == ".gguf":
            options["gguf_file"] = location.name
            location = location.parent
        logger.info("loading the local language model %s", path)
        with _gguf_parsed_once():
            tokenizer = AutoTokenizer.from_pretrained(str(location), **options)
            model = AutoModelForCausalLM.from_pretrained(str(location), **options)
        model.eval()
        _loaded[path] = (model, tokenizer)
        return model, tokenizer


@contextmanager
def _gguf_parsed_once() -> Iterator[None]:
    """While the block runs, a .gguf file is parsed once and the tensor-name map of an
    architecture built once. transformers parses the file for the tokenizer, the configuration
    and the weights (`gguf.GGUFReader` each time) and builds the name map again for every
    module of the model (`gguf.get_tensor_name_map`); both read the module's attribute when
    called, so the memoised versions are what they get. The reader is read-only (a memory
    map). Without the `gguf` package, nothing changes (a folder model needs none)."""
    try:
        import gguf
    except ImportError:
        yield
        return
    read, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple[str, str], Any] = {}

    def reader(path: Any, mode: str = "r") -> Any:
        key = (str(path), mode)
        if key not in readers:
            readers[key] = read(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.cache(name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = read, name_map


def model_is_loaded(path: str) -> bool:
    return path in _loaded


class _StopOnEvent:
    """A stopping criterion: generation ends when the reply is closed."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> bool:
        return self.event.is_set()


class LocalReply(Reply):
    def __init__(self, streamer: Any, stop: threading.Event, thread: threading.Thread) -> None:
        self._streamer = streamer
        self._stop = stop
        self._thread = thread
        self.error: BaseException | None = None

    async def __aiter__(self) -> AsyncIterator[str]:
        pieces = iter(self._streamer)
        while True:
            try:
                piece = await asyncio.to_thread(next, pieces, None)
            except queue.Empty:
                self._stop.set()
                raise LLMStreamBroken("the local model timed out producing text") from None
            if piece is None:
                break
            if piece:
                yield piece
        if self.error is not None:
            raise LLMStreamBroken(f"{type(self.error).__name__}: {self.error}") from self.error

    async def aclose(self) -> None:
        self._stop.set()


class LocalBackend(LLMBackend):
    name = "local"

    def __init__(self) -> None:
        self.path = settings.LLM_MODEL_PATH
        self.timeout = settings.LLM_TIMEOUT_S

    @property
    def configured(self) -> bool:
        return bool(self.path) and Path(self.path).exists()

    @property
    def model_name(self) -> str:
        return settings.LLM_MODEL or (Path(self.path).name if self.path else "")

    def not_configured_reason(self) -> str:
        if not self.path:
            return "Set LLM_MODEL_PATH (a transformers model folder or a .gguf file)."
        return f"LLM_MODEL_PATH does not exist: {self.path}"

    def probe(self) -> str:
        """The file or folder is there (it is loaded on the first generative answer)."""
        return "" if self.configured else self.not_configured_reason()

    async def open(self, messages: Sequence[ChatMessage], *, max_tokens: int) -> Reply:
        if not self.configured:
            raise LLMUnavailable(self.not_configured_reason())
        try:
            model, tokenizer = await asyncio.to_thread(model_load, self.path)
        except Exception as error:
            logger.exception("loading the local language model %s failed", self.path)
            raise LLMUnavailable(f"cannot load {self.path}: {error}"[:300]) from error
        from transformers import StoppingCriteriaList, TextIteratorStreamer

        inputs = tokenizer.apply_chat_template(
            list(messages), add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        streamer = TextIteratorStreamer(
            tokenizer, skip_prompt=True, skip_special_tokens=True, timeout=self.timeout
        )
        stop = threading.Event()
        reply: LocalReply

        def generate() -> None:
            try:
                model.generate(
                    **inputs,
                    streamer=streamer,
                    max_new_tokens=max_tokens,
                    do_sample=False,
                    repetition_penalty=REPETITION_PENALTY,
                    stopping_criteria=StoppingCriteriaList([_StopOnEvent(stop)]),
                    pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id,
                )
            except BaseException as error:  # reported by the reply, which then ends
                reply.error = error
                streamer.end()

        thread = threading.Thread(target=generate, name="local-llm", daemon=True)
        reply = LocalReply(streamer, stop, thread)
        thread.start()
        return reply
