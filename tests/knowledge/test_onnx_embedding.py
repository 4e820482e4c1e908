"""The embedding model on ONNX Runtime: its vectors match sentence-transformers', the runtime is
part of the model version (changing it makes embeddings stale, `reindex --stale` re-embeds),
thread settings reach the session, batches are sized by token length, and the sentences an
answer may quote are embedded at ingestion, so that answering embeds only the question."""

from __future__ import annotations

import gc
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command

from chat.answering import extractive
from chat.answering.pipeline import AnswerOptions, answer_stream
from knowledge import embedding, selectors, services
from knowledge.models import Chunk, Embedding, SentenceVector
from knowledge.sentences import answerable_sentences, text_hash

TEXTS = [
    "How many days of annual leave do I get?",
    "Staff receive 25 days of paid annual leave per calendar year.",
    "Passwords must be at least 14 characters long and must never be reused.",
    "Café naïve résumé — “quotes” ½ and a tab\tthen a new\nline.",
    " ".join(f"word{n} and another phrase about leave" for n in range(80)),  # > 256 pieces
]

HANDBOOK = """# Staff handbook

## Annual leave

Staff receive 25 days of paid annual leave per calendar year. After ten years of service the
allowance rises to 30 days. Leave must be approved by your line manager in advance.

## Expenses

Travel expenses are reimbursed within 30 days of a claim. Receipts must be attached to every
claim over 20 euros. Claims older than three months are not reimbursed.
"""


@pytest.fixture
def runtime(settings):
    """Switch settings.EMBEDDING_RUNTIME for the test (the loaded model and the version
    follow), and back afterwards."""

    def switch(name: str) -> None:
        settings.EMBEDDING_RUNTIME = name
        embedding._load_model.cache_clear()
        embedding.model_version.cache_clear()
        extractive._vector_cache.clear()

    yield switch
    embedding._load_model.cache_clear()
    embedding.model_version.cache_clear()
    extractive._vector_cache.clear()


@pytest.mark.slow
def test_onnx_vectors_match_sentence_transformers(runtime):
    runtime("torch")
    reference = embedding.embed_texts(TEXTS)
    runtime("onnx")
    fp32 = embedding.embed_texts(TEXTS)
    runtime("onnx-int8")
    int8 = embedding.embed_texts(TEXTS)

    assert np.allclose(np.linalg.norm(fp32, axis=1), 1.0, atol=1e-5)
    assert (fp32 * reference).sum(axis=1).min() > 0.99999
    assert np.abs(fp32 - reference).max() < 1e-4
    assert (int8 * reference).sum(axis=1).min() > 0.97  # quantised: close, not equal


def test_the_runtime_is_part_of_the_model_version(runtime):
    runtime("onnx")
    onnx = embedding.model_version()
    runtime("onnx-int8")
    int8 = embedding.model_version()
    runtime("torch")
    torch = embedding.model_version()
    assert onnx.endswith("+onnx") and int8.endswith("+onnx-int8")
    assert len({onnx, int8, torch}) == 3 and "+" not in torch


def test_an_unknown_runtime_is_a_configuration_error(runtime):
    from django.core.exceptions import ImproperlyConfigured

    runtime("tensorflow")
    with pytest.raises(ImproperlyConfigured, match="EMBEDDING_RUNTIME"):
        embedding.model_version()


def test_embedding_threads_reach_the_onnx_session(runtime, settings):
    settings.EMBEDDING_THREADS = 2
    runtime("onnx")
    options = embedding.get_model().session.get_session_options()
    assert options.intra_op_num_threads == 2


def test_batches_are_sized_by_token_length():
    lengths = [10, 200, 12, 200, 11, 50, 10, 9]
    batches = embedding.length_batches(lengths, batch_size=3, batch_tokens=400)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        width = max(lengths[i] for i in batch)
        assert len(batch) <= 3 and (len(batch) * width <= 400 or len(batch) == 1)
    assert batches[0] == [1, 3]  # the two longest together: a third would pass 400 tokens
    assert batches == embedding.length_batches(lengths, batch_size=3, batch_tokens=400)


def test_bulk_batches_hold_only_texts_close_to_their_longest():
    lengths = [100, 95, 89, 50, 49, 45, 44]
    batches = embedding.length_batches(lengths, 64, 4096, min_width_share=0.9)
    assert batches == [[0, 1], [2], [3, 4, 5], [6]]  # 89 < 90, 50 < 80.1, 44 < 45
    assert embedding.length_batches(lengths, 64, 4096) == [list(range(7))]  # by default one


def test_a_text_gets_the_same_vector_whatever_it_is_batched_with(runtime):
    runtime("onnx")
    alone = np.stack([embedding.embed_texts([text])[0] for text in TEXTS])
    together = embedding.embed_texts(TEXTS)
    assert np.abs(alone - together).max() < 1e-5


def test_tokenizer_matches_transformers_fast_tokenizer():
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(embedding.model_path()))
    reference.model_max_length = 1_000_000
    for text in TEXTS:
        expected = reference(text, add_special_tokens=True, return_offsets_mapping=True)
        ours = embedding.tokenize(text, add_special_tokens=True, return_offsets_mapping=True)
        assert ours["input_ids"] == expected["input_ids"]
        assert [tuple(span) for span in ours["offset_mapping"]] == [
            tuple(span) for span in expected["offset_mapping"]
        ]


def _ingest(tmp_path) -> list:
    path = tmp_path / "handbook.md"
    path.write_text(HANDBOOK)
    outcomes = services.documents_ingest(paths=[path], title=None, enabled=True, dry_run=False)
    assert [o.action for o in outcomes] == ["new"]
    return outcomes


@pytest.mark.django_db
def test_ingestion_stores_a_vector_for_every_answerable_sentence_once(tmp_path):
    before = SentenceVector.objects.count()  # other tests' deleted documents may have left some
    _ingest(tmp_path)
    sentences = {
        text_hash(sentence): sentence
        for text, sheet in Chunk.objects.values_list("text", "sheet")
        for sentence in answerable_sentences(text, sheet=bool(sheet))
    }
    stored = dict(
        SentenceVector.objects.filter(model=embedding.model_version()).values_list(
            "text_hash", "vector"
        )
    )
    assert len(sentences) >= 6 and set(sentences) <= set(stored)
    assert SentenceVector.objects.count() - before == len(sentences)  # each once
    key = text_hash("Receipts must be attached to every claim over 20 euros.")
    expected = embedding.embed_texts([sentences[key]])[0]
    assert np.abs(np.asarray(stored[key]) - expected).max() < 1e-5


@pytest.mark.django_db(transaction=True)
async def test_answering_embeds_only_the_question(tmp_path, staff_user, monkeypatch):
    from asgiref.sync import sync_to_async

    await sync_to_async(_ingest)(tmp_path)
    extractive._vector_cache.clear()
    embedded: list[list[str]] = []
    real = embedding.embed_texts
    monkeypatch.setattr(
        embedding, "embed_texts", lambda texts, **kw: embedded.append(list(texts)) or real(texts)
    )
    question = "How many days of annual leave do staff receive?"

    events = [
        event
        async for event in answer_stream(
            user=staff_user, question=question, message_id=uuid.uuid4(), options=AnswerOptions()
        )
    ]

    text = "".join(e.data["text"] for e in events if e.type == "answer_delta")
    assert "25 days of paid annual leave" in text
    assert embedded == [[question]]


@pytest.mark.django_db
def test_reindex_stale_re_embeds_chunks_and_sentences_of_another_runtime(tmp_path, runtime):
    runtime("torch")
    _ingest(tmp_path)
    torch_version = embedding.model_version()
    chunks = Chunk.objects.count()
    sentences = SentenceVector.objects.filter(model=torch_version).count()
    before = dict(Embedding.objects.values_list("chunk_id", "vector"))

    runtime("onnx")
    assert selectors.embeddings_stale().count() == chunks
    out = StringIO()
    call_command("reindex", "--stale", stdout=out, stderr=StringIO())

    onnx_version = embedding.model_version()
    assert f"Re-embedded {chunks} chunk(s) with {onnx_version}" in out.getvalue()
    assert f"Embedded {sentences} sentence(s)" in out.getvalue()
    assert set(Embedding.objects.values_list("model", flat=True)) == {onnx_version}
    assert set(SentenceVector.objects.values_list("model", flat=True)) == {onnx_version}
    assert torch_version != onnx_version
    assert not SentenceVector.objects.filter(model=torch_version).exists()
    for chunk_id, vector in Embedding.objects.values_list("chunk_id", "vector"):
        assert float(np.dot(vector, before[chunk_id])) > 0.99999
    again = StringIO()
    call_command("reindex", "--stale", stdout=again, stderr=StringIO())
    assert "Every chunk has an embedding" in again.getvalue()
    assert "Embedded 0 sentence(s)" in again.getvalue()


def test_concurrent_questions_are_embedded_together_with_the_vectors_they_get_alone(runtime):
    runtime("onnx")
    encoder = embedding.get_model()
    questions = [f"How many days of leave after {n} years of service?" for n in range(12)]
    alone = embedding.embed_texts(questions)
    batcher = embedding.QueryBatcher(encoder, window_s=0.05, max_batch=64)
    start = threading.Barrier(len(questions))

    def ask(question: str) -> np.ndarray:
        start.wait()
        return batcher.embed(question)

    with ThreadPoolExecutor(max_workers=len(questions)) as pool:
        together = np.stack(list(pool.map(ask, questions)))

    assert np.abs(together - alone).max() < 1e-5
    assert batcher.batches < len(questions)  # some questions shared a model call


def test_a_question_that_fits_is_tokenised_once_with_the_ids_the_encoder_gives(runtime):
    """The batcher reads a question's token ids from the tokenising that checks its length;
    only a question cut to fit is tokenised again, as cut. The ids, and so the vectors, are
    the encoder's own."""
    runtime("onnx")
    encoder = embedding.get_model()
    texts = [
        "How many days of leave?",
        "Ünïcödé: «quotes», the 2nd café’s naïve façade — and 🙂 emoji, tabs\tand\nlines",
        "word " * (embedding.MAX_TOKENS + 50),
    ]
    for text in texts:
        fitted, truncated, ids = embedding._fitted_with_ids(text)
        assert (fitted, truncated) == embedding.truncate_to_limit(text)
        assert (ids is None) == truncated
        if ids is not None:
            assert ids == encoder.token_ids([fitted])[0]

    class Counting:
        asked: list[str] = []

        def token_ids(self, rows):
            self.asked.extend(rows)
            return encoder.token_ids(rows)

        def run(self, rows):
            return encoder.run(rows)

    counting = Counting()
    batcher = embedding.QueryBatcher(counting, window_s=0.0, max_batch=8)
    vectors = np.stack([batcher.embed(text) for text in texts])
    expected = embedding.embed_texts([embedding.truncate_to_limit(t)[0] for t in texts])
    assert np.abs(vectors - expected).max() < 1e-5
    assert counting.asked == [embedding.truncate_to_limit(texts[2])[0]]


def test_a_question_asked_alone_does_not_wait_for_company_and_one_expecting_it_does(runtime):
    """The window is waited only for a question whose caller expects others (another answer
    in progress); one asked alone runs at once. The window here is a minute: a question that
    waited for it would fail the test."""
    runtime("onnx")
    batcher = embedding.QueryBatcher(embedding.get_model(), window_s=60.0, max_batch=2)
    with ThreadPoolExecutor(max_workers=2) as pool:
        alone = pool.submit(batcher.embed, "How many days of leave?", alone=True)
        alone.result(timeout=20)
        assert batcher.batches == 1
        waiting = pool.submit(batcher.embed, "Who approves expenses?")
        with pytest.raises(FuturesTimeout):
            waiting.result(timeout=0.5)  # waits for a second question to join it
        joined = pool.submit(batcher.embed, "Who signs contracts?", alone=True)
        waiting.result(timeout=20), joined.result(timeout=20)
    assert batcher.batches == 2  # the two later questions in one model call


def test_a_failing_batch_gives_each_waiting_question_the_error(runtime):
    runtime("onnx")

    class Broken:
        def token_ids(self, texts):
            return [[101, 102] for _ in texts]

        def run(self, rows):
            raise RuntimeError("model failed")

    batcher = embedding.QueryBatcher(Broken(), window_s=0.0, max_batch=8)
    with pytest.raises(RuntimeError, match="model failed"):
        batcher.embed("Leave?")
    with pytest.raises(RuntimeError, match="model failed"):  # the thread lives on
        batcher.embed("Leave again?")


def test_each_question_of_a_batch_is_given_its_share_of_the_model_calls_cpu(runtime):
    runtime("onnx")
    # Loading the shared tokenizer (on its first use in a process: about 30 ms) and a garbage
    # collection both land on whichever question's tokenising meets them: neither is a share.
    embedding.get_tokenizer()
    batcher = embedding.QueryBatcher(embedding.get_model(), window_s=0.5, max_batch=64)
    start = threading.Barrier(2)

    def ask(question: str) -> float:
        start.wait()
        batcher.embed(question)
        return embedding.batched_cpu_ms()  # read in the asking thread

    gc.disable()
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:
            shares = list(pool.map(ask, ["How many days of leave?", "Who approves expenses?"]))
    finally:
        gc.enable()
    assert batcher.batches == 1  # one model call, shared
    # Each: half the call, and its own tokenising (a small part).
    assert min(shares) > 0 and abs(shares[0] - shares[1]) < 0.5 * min(shares)


@pytest.mark.django_db
def test_the_embed_stage_counts_the_models_cpu_on_the_batchers_thread(runtime, settings):
    """`manage.py bench` prints each stage's CPU: the question's embedding is counted where the
    model ran for it (the batcher's thread), not only the asking thread's wait."""
    from chat.answering.search import _embed
    from chat.answering.stage_cpu import stage_cpu_begin

    runtime("onnx")
    question = "How many days of annual leave do full-time employees receive each year?"
    embedding.embed_texts([question])  # the model loaded and warm
    settings.EMBEDDING_BATCH_WINDOW_MS = 1
    embedding._batcher = None
    try:
        _embed(question, alone=True)  # the batcher started
        counts = stage_cpu_begin()
        _embed(question, alone=True)
        assert embedding._batcher.batches == 2
        assert embedding.batched_cpu_ms() > 0
        settings.EMBEDDING_BATCH_WINDOW_MS = 0  # the model runs in this thread, which counts it
        started = time.thread_time()
        embedding.embed_query(question)
        in_this_thread_ms = (time.thread_time() - started) * 1000
        assert embedding.batched_cpu_ms() == 0.0
        # The asking thread alone spends a tenth of the model's CPU (tokenising, waiting).
        assert counts["embed"] >= 0.5 * in_this_thread_ms
    finally:
        embedding._batcher = None


@pytest.mark.django_db
def test_with_a_batch_window_embed_query_goes_through_the_batcher(runtime, settings):
    runtime("onnx")
    settings.EMBEDDING_BATCH_WINDOW_MS = 1
    embedding._batcher = None
    try:
        vector, truncated = embedding.embed_query("How many days of annual leave do I get?")
        batcher = embedding._batcher
        assert batcher is not None and batcher.batches == 1 and not truncated
        expected = embedding.embed_texts(["How many days of annual leave do I get?"])[0]
        assert np.abs(vector - expected).max() < 1e-5
    finally:
        embedding._batcher = None


def test_a_question_cancelled_while_it_waits_is_left_out_of_the_batch(runtime):
    """A submitted question whose waiter gave up (a Stop, a superseded embedding) is never run,
    nor waited for: the batch goes on with the others (here at once, the window being a
    minute)."""
    runtime("onnx")
    batcher = embedding.QueryBatcher(embedding.get_model(), window_s=60, max_batch=8)
    waiting = batcher.submit("How many days of leave?")  # waits the window for company
    assert waiting.cancel()
    vector, truncated, cpu_ms = batcher.submit("Who approves expenses?", alone=True).result(10)
    assert waiting.cancelled() and batcher.batches == 1
    expected = embedding.embed_texts(["Who approves expenses?"])[0]
    assert np.abs(vector - expected).max() < 1e-5 and not truncated and cpu_ms > 0


@pytest.mark.django_db
async def test_in_a_server_process_the_event_loop_waits_for_the_batcher_with_no_worker_thread(
    runtime, settings, monkeypatch
):
    """`query_embed` hands a server's question to the batcher's thread and waits for it there
    (no worker thread in between, once the batcher is started: the first question starts it,
    loading the model, on a worker thread): the vector `embed_query` gives, cut to fit when
    too long, and the embed stage counts the CPU the batcher's thread spent for it."""
    from asgiref.sync import SyncToAsync

    from chat.answering.search import query_embed
    from chat.answering.stage_cpu import stage_cpu_begin

    runtime("onnx")
    question = "How many days of annual leave do full-time employees receive each year?"
    expected = embedding.embed_texts([question])[0]  # the model loaded and warm
    settings.EMBEDDING_BATCH_WINDOW_MS = 1
    embedding._batcher = None
    hops: list[object] = []
    hop = SyncToAsync.__call__

    def hop_counted(self, *args, **kwargs):
        hops.append(self.func)
        return hop(self, *args, **kwargs)

    monkeypatch.setattr(SyncToAsync, "__call__", hop_counted)
    try:
        await query_embed(question)
        assert len(hops) == 1 and embedding._batcher.batches == 1  # started on a worker thread
        hops.clear()
        counts = stage_cpu_begin()
        vector, truncated = await query_embed(question)
        assert not hops and embedding._batcher.batches == 2
        assert np.abs(vector - expected).max() < 1e-5 and not truncated
        assert counts["embed"] > 0
        long_question = " ".join(["leave"] * (embedding.MAX_TOKENS + 10))
        vector, truncated = await query_embed(long_question)
        assert truncated and not hops
        assert np.abs(vector - embedding.embed_query(long_question)[0]).max() < 1e-5
    finally:
        embedding._batcher = None


@pytest.mark.django_db
def test_int8_questions_are_never_batched_their_vectors_would_depend_on_the_batch(
    runtime, settings
):
    runtime("onnx-int8")
    settings.EMBEDDING_BATCH_WINDOW_MS = 1
    embedding._batcher = None
    vector, _ = embedding.embed_query("How many days of annual leave do I get?")
    assert embedding._batcher is None
    assert np.array_equal(
        vector, embedding.embed_texts(["How many days of annual leave do I get?"])[0]
    )
