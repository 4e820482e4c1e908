"""Hybrid retrieval on real PostgreSQL + pgvector with the real embedding model."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from knowledge import embedding, lexical_search, retrieval, vocabulary
from knowledge.access import OPERATOR, reader_for
from knowledge.lexical_search import LexicalQuery, LexicalTerm, chunks_search_lexical, lexical_query
from knowledge.models import Chunk, Document
from knowledge.ranking import reciprocal_rank_fusion, scores_fuse
from knowledge.retrieval import chunks_search
from knowledge.search_scope import knowledge_base_is_empty
from knowledge.sql_arrays import bigint_array
from knowledge.vector_search import (
    chunks_search_vector,
    exact_search_suits,
    similarities_for,
    vector_search_settings,
    vector_search_sql,
    vector_text,
)
from tests.support.knowledge_base import basis, document_create
from tests.support.statements import rows_read, statements_recorded

pytestmark = pytest.mark.django_db
DOCUMENTS = Document._meta.db_table


@pytest.fixture(autouse=True)
def fresh_vocabulary():
    """Term weights come from the knowledge base's vocabulary: build it from this test's data."""
    vocabulary.vocabulary_forget()
    yield
    vocabulary.vocabulary_forget()


LEAVE_TEXTS = [
    "Every full-time employee receives 25 days of annual leave per year.",
    "You may carry over up to 5 days of unused annual leave into the next year.",
]
OTHER_TEXTS = [
    "Laptops use full-disk encryption and lock after five minutes of inactivity.",
    "Hotel costs are reimbursed up to 150 pounds per night in London.",
    "Refunds are paid back to the original payment method within ten working days.",
]
MODES = ("hybrid", "vector", "lexical")


def retrieved_documents(result) -> set[int]:
    return {chunk.document_id for chunk in result.chunks}


@pytest.mark.parametrize("mode", MODES)
def test_disabled_and_unready_document_chunks_are_never_retrieved(mode):
    searchable = document_create(title="Handbook", texts=LEAVE_TEXTS)
    hidden = [
        document_create(title="Disabled copy", texts=LEAVE_TEXTS, enabled=False),
        document_create(title="Pending copy", texts=LEAVE_TEXTS, status=Document.Status.PENDING),
        document_create(
            title="Processing copy", texts=LEAVE_TEXTS, status=Document.Status.PROCESSING
        ),
        document_create(title="Failed copy", texts=LEAVE_TEXTS, status=Document.Status.FAILED),
    ]

    result = chunks_search(
        reader=OPERATOR, query="how many days of annual leave", top_k=20, mode=mode
    )

    assert retrieved_documents(result) == {searchable.pk}
    assert len(result.chunks) == len(LEAVE_TEXTS)
    assert not {doc.pk for doc in hidden} & retrieved_documents(result)


def test_knowledge_base_with_only_disabled_documents_counts_as_empty():
    document_create(title="Disabled", texts=LEAVE_TEXTS, enabled=False)
    assert knowledge_base_is_empty(reader=OPERATOR)
    assert chunks_search(reader=OPERATOR, query="annual leave", top_k=5).chunks == []

    document_create(title="Enabled", texts=OTHER_TEXTS)
    assert not knowledge_base_is_empty(reader=OPERATOR)


def analyze_tables() -> None:
    """Give the planner real statistics, as autovacuum does for a live knowledge base.

    Rows created inside a test transaction have none, and without them the planner guesses
    the tables are tiny and sorts every row exactly instead of using the HNSW index.
    """
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE knowledge_document, knowledge_chunk, knowledge_embedding")


def near(rng: np.random.Generator, centre: np.ndarray, count: int, spread: float) -> np.ndarray:
    """`count` unit vectors around `centre`, at a distance set by `spread`."""
    noise = rng.normal(size=(count, embedding.DIMENSIONS)).astype(np.float32)
    noise -= np.outer(noise @ centre, centre)  # orthogonal to the centre
    noise /= np.linalg.norm(noise, axis=1, keepdims=True)
    vectors = centre + spread * noise
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def vector_plan(query_vector: np.ndarray, limit: int) -> str:
    """EXPLAIN of the exact k-NN query retrieval runs, under the settings it runs with."""
    sql, params = vector_search_sql(reader=OPERATOR, query_vector=query_vector, limit=limit)
    with transaction.atomic(), connection.cursor() as cursor:
        vector_search_settings(limit=limit)
        cursor.execute(f"EXPLAIN {sql}", params)
        return "\n".join(row[0] for row in cursor.fetchall())


def test_filtered_vector_query_still_returns_top_k_when_most_chunks_are_disabled():
    """270 of 300 chunks belong to disabled documents and are the query's nearest neighbours.

    The HNSW scan hands over at most ef_search candidates before the WHERE filter runs;
    every one of the nearest is filtered out, which would leave nothing. pgvector's iterative
    scan has to keep scanning until top_k rows pass the filter.
    """
    rng = np.random.default_rng(7)
    query = basis(0)
    for batch in range(9):
        document_create(
            title=f"Archived {batch}",
            texts=[f"archived memo {batch}-{i}" for i in range(30)],
            vectors=near(rng, query, 30, 0.2),
            enabled=False,
        )
    live = document_create(
        title="Live",
        texts=[f"current memo {i}" for i in range(30)],
        vectors=near(rng, query, 30, 1.0),
    )
    analyze_tables()
    # The scenario starves a plain filtered k-NN: the 80 nearest chunks are all disabled.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT e.chunk_id FROM knowledge_embedding e "
            "ORDER BY e.vector <=> %s::vector LIMIT 80) nearest "
            "JOIN knowledge_chunk c ON c.id = nearest.chunk_id WHERE c.document_id = %s",
            [str(query.tolist()), live.pk],
        )
        assert cursor.fetchone()[0] == 0
    # Knowing that only 30 rows pass the filter, the planner here would (rightly) filter
    # first and sort those exactly, which cannot starve. With a larger knowledge base, a
    # less selective filter or stale statistics it walks the HNSW index instead; ruling out
    # the explicit sort (for this test's transaction only) reproduces that plan, so the test
    # exercises the iterative scan.
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")
    assert "Index Scan using embedding_vector_hnsw" in vector_plan(query, limit=80)

    hits = chunks_search_vector(reader=OPERATOR, query_vector=query, limit=20)
    result = chunks_search(
        reader=OPERATOR, query="memo", query_vector=query, top_k=20, mode="vector"
    )

    assert len(hits) == 20
    assert len(result.chunks) == 20
    assert retrieved_documents(result) == {live.pk}
    similarities = [chunk.similarity for chunk in result.chunks]
    assert similarities == sorted(similarities, reverse=True)


def test_vector_query_uses_the_hnsw_index():
    rng = np.random.default_rng(11)
    for batch in range(3):
        document_create(
            title=f"Policies {batch}",
            texts=[f"policy paragraph {batch}-{i}" for i in range(100)],
            vectors=near(rng, basis(batch), 100, 2.0),
        )
    analyze_tables()
    query_vector, _ = embedding.embed_query("annual leave")
    # On 300 rows an exact scan-and-sort is cheaper than the index, and PostgreSQL picks it
    # (it switches to HNSW on its own somewhere between 1,000 and 3,000 chunks). Ruling out
    # the explicit sort for this test's transaction leaves the HNSW index as the only way to
    # deliver rows in order, which it can only do for the shape `ORDER BY vector <=> q
    # LIMIT k`; a query of any other shape would still be planned as a sort.
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_sort = off")

    plan = vector_plan(query_vector, limit=20)

    assert "Index Scan using embedding_vector_hnsw" in plan
    assert "Order By: (vector <=>" in plan


@pytest.mark.django_db(transaction=True)
def test_vector_search_settings_do_not_leak_out_of_the_query_transaction():
    document_create(title="Handbook", texts=LEAVE_TEXTS)

    assert chunks_search(reader=OPERATOR, query="annual leave", top_k=20, mode="vector").chunks

    # SET LOCAL ended with the search's transaction: the pooled connection is unchanged.
    with connection.cursor() as cursor:
        cursor.execute("SHOW hnsw.iterative_scan")
        assert cursor.fetchone()[0] == "off"
        cursor.execute("SHOW hnsw.ef_search")
        assert cursor.fetchone()[0] == "40"


def test_lexical_results_stand_alone_when_the_vector_side_finds_nothing():
    # Embeddings from another model are stale: the vector side has nothing it may compare.
    document = document_create(
        title="Handbook", texts=LEAVE_TEXTS + OTHER_TEXTS, model="old-model@1"
    )
    query_vector, _ = embedding.embed_query("annual leave")
    assert chunks_search_vector(reader=OPERATOR, query_vector=query_vector, limit=40) == []

    result = chunks_search(reader=OPERATOR, query="annual leave", top_k=5)

    assert {chunk.text for chunk in result.chunks} == set(LEAVE_TEXTS)
    assert all(chunk.document_id == document.pk for chunk in result.chunks)
    assert all(chunk.vector_rank is None and chunk.lexical_rank for chunk in result.chunks)
    assert all(chunk.similarity is None for chunk in result.chunks)


def test_vector_results_stand_alone_when_no_word_of_the_question_is_in_the_documents():
    document_create(title="Handbook", texts=LEAVE_TEXTS + OTHER_TEXTS)
    question = "vacation entitlement allowance"
    assert chunks_search_lexical(reader=OPERATOR, question=question, limit=40) == []

    result = chunks_search(reader=OPERATOR, query=question, top_k=3)

    assert len(result.chunks) == 3
    assert all(chunk.lexical_rank is None and chunk.vector_rank for chunk in result.chunks)
    assert result.chunks[0].text in LEAVE_TEXTS
    assert result.best_similarity == result.chunks[0].similarity > 0.3


def test_hybrid_result_carries_similarity_score_and_location():
    document = document_create(
        title="Handbook",
        texts=LEAVE_TEXTS,
        sections=["Handbook > Annual leave", "Handbook > Annual leave > Carry-over"],
        pages=[3, 4],
        metadata={"url": "https://intranet.example/handbook"},
    )
    document_create(title="Other", texts=OTHER_TEXTS)

    result = chunks_search(
        reader=OPERATOR, query="how many days of annual leave does an employee receive", top_k=5
    )

    best = result.chunks[0]
    assert best.document_id == document.pk
    assert best.text == LEAVE_TEXTS[0]
    assert (best.page, best.section, best.chunk_index) == (3, "Handbook > Annual leave", 0)
    assert best.document_url == "https://intranet.example/handbook"
    assert best.vector_rank is not None and best.lexical_rank is not None
    assert 0.4 < best.similarity <= 1.0
    scores = [chunk.score for chunk in result.chunks]
    assert scores == sorted(scores, reverse=True)
    assert best.excerpt == LEAVE_TEXTS[0]


def test_a_lexical_side_run_ahead_gives_the_same_result_without_ranking_again():
    """The chat runs a search's lexical ranking while the question is embedded
    (`lexical_side_run`) and hands it to `chunks_search`: the same chunks, scores and ranks,
    one ranking statement fewer; a side run for other arguments is not used."""
    document_create(title="Handbook", texts=LEAVE_TEXTS, pages=[3, 4])
    other = document_create(title="Other", texts=OTHER_TEXTS)
    query = "how many days of annual leave does an employee receive"
    vector = embedding.embed_query(query)[0]
    plain = chunks_search(reader=OPERATOR, query=query, top_k=5, query_vector=vector)

    side = retrieval.lexical_side_run(query=query, reader=OPERATOR, top_k=5)
    with statements_recorded() as statements:
        ahead = chunks_search(
            reader=OPERATOR, query=query, top_k=5, query_vector=vector, lexical_side=side
        )
    assert ahead.chunks == plain.chunks and side.hits
    assert not [s for s in statements if "search_vector @@" in s]  # not ranked again

    for elsewhere in (
        {"query": "annual leave", "top_k": 5},
        {"query": query, "top_k": 4},
        {"query": query, "top_k": 5, "document_ids": [other.pk]},
    ):
        expected = chunks_search(reader=OPERATOR, query_vector=vector, **elsewhere).chunks
        with statements_recorded() as statements:
            given = chunks_search(
                reader=OPERATOR, query_vector=vector, lexical_side=side, **elsewhere
            ).chunks
        assert given == expected and [s for s in statements if "search_vector @@" in s]


def test_tied_chunks_days_and_lexical_only_cosines_are_read_in_one_statement():
    """A hybrid search reads the days of its tied candidates and the cosines of its
    lexical-only ones in one statement: the values the two separate reads give; a chunk
    without a current embedding gets no cosine; with nothing of one kind to read, only the
    other's statement runs."""
    from knowledge.models import Embedding
    from knowledge.ranking import days_read

    document_create(title="Handbook", texts=LEAVE_TEXTS)
    document_create(title="Other", texts=OTHER_TEXTS)
    ids = list(Chunk.objects.order_by("pk").values_list("pk", flat=True))
    Embedding.objects.filter(chunk_id=ids[-1]).delete()
    vector = vector_text(embedding.embed_query("annual leave carry-over")[0])
    day_ids, similarity_ids = ids[:2], ids[1:]
    expected_days: dict[int, int] = {}
    days_read(ids, expected_days)
    expected = similarities_for(similarity_ids, vector)
    assert set(expected) == set(ids[1:-1])

    days: dict[int, int] = {}
    with statements_recorded() as statements:
        got = retrieval._days_and_similarities_read(
            day_ids, days, similarity_ids=similarity_ids, query_vector=vector
        )
    assert len(statements) == 1
    assert got == expected and days == expected_days

    with statements_recorded() as statements:  # every day known: the cosines alone
        assert (
            retrieval._days_and_similarities_read(
                day_ids, days, similarity_ids=similarity_ids, query_vector=vector
            )
            == expected
        )
    assert len(statements) == 1 and "AT TIME ZONE" not in statements[0]
    days = {}
    with statements_recorded() as statements:  # no cosine wanted: the days alone
        assert (
            retrieval._days_and_similarities_read(
                day_ids, days, similarity_ids=[], query_vector=vector
            )
            == {}
        )
    assert len(statements) == 1 and "<=>" not in statements[0]
    assert days == {chunk_id: expected_days[chunk_id] for chunk_id in day_ids}
    with statements_recorded() as statements:
        retrieval._days_and_similarities_read(day_ids, days, similarity_ids=[], query_vector=vector)
    assert not statements


def test_the_days_of_a_few_chunks_read_only_their_documents():
    """The day of each tied chunk (and a lexical-only chunk's cosine) is looked up from its own
    document, never by joining the whole documents table, whatever plan the planner prefers:
    the work does not grow with the library (docs/decisions/0174-a-chunk-s-day-looked-up.md)."""
    from knowledge.ranking import _DAYS_SQL

    for number in range(30):
        document_create(
            title=f"Note {number}", texts=[f"note {number} paragraph"], vectors=[basis(number)]
        )
    analyze_tables()
    asked = list(Chunk.objects.order_by("pk").values_list("pk", flat=True)[:2])
    vector = vector_text(basis(0))

    # With nested loops and merge joins off, a join would have to hash the documents whole;
    # with sequential scans off, a lookup goes through the key, as in a larger library.
    def documents_read(sql: str, params: list) -> int | None:
        planner = ("enable_nestloop = off", "enable_mergejoin = off", "enable_seqscan = off")
        return rows_read(sql, params, table=DOCUMENTS, planner=planner)

    assert documents_read(_DAYS_SQL, [bigint_array(asked)]) == len(asked)
    assert documents_read(
        retrieval._DAYS_AND_SIMILARITIES_SQL,
        [bigint_array(asked[1:]), vector, embedding.model_version(), bigint_array(asked)],
    ) == len(asked)


def test_a_search_reads_no_document_however_many_are_withdrawn():
    """Both sides of a search, on both k-NN plans, test availability on the rows' own copy of
    when their document is withdrawn, kept by the database: they read no document, so neither
    the documents withdrawn (disabled, not ready, expired) nor those carrying an expiry date
    make every question read them all
    (docs/decisions/0179-the-row-knows-when-it-is-withdrawn.md). What is searched stays the
    rule's."""
    later = timezone.now() + timedelta(days=365)
    for number in range(30):
        Document.objects.filter(
            pk=document_create(
                title=f"Policy {number}",
                texts=[f"annual leave policy {number}"],
                vectors=[basis(number)],
            ).pk
        ).update(expires_at=later)
    withdrawn = set()
    for number in range(10):
        expired = document_create(
            title=f"Expired {number}", texts=["annual leave expired"], vectors=[basis(1)]
        )
        Document.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(days=1))
        document_create(
            title=f"Disabled {number}",
            texts=["annual leave off"],
            vectors=[basis(2)],
            enabled=False,
        )
        document_create(
            title=f"Failed {number}",
            texts=["annual leave failed"],
            vectors=[basis(3)],
            status="failed",
        )
        withdrawn |= {f"Expired {number}", f"Disabled {number}", f"Failed {number}"}
    analyze_tables()
    staff = reader_for(get_user_model().objects.create_user(username="reader", is_staff=True))

    for reader, exact in ((OPERATOR, False), (staff, True)):
        assert exact_search_suits(reader=reader) is exact
        with CaptureQueriesContext(connection) as captured:
            result = chunks_search(
                query="annual leave policy", reader=reader, top_k=20, query_vector=basis(0)
            )
        found = {chunk.document_title for chunk in result.chunks}
        assert len(found) == 20 and found <= {f"Policy {number}" for number in range(30)}
        assert not found & withdrawn
        searches = [
            query["sql"]
            for query in captured.captured_queries
            if "<=>" in query["sql"]
            and "ORDER BY" in query["sql"]
            or "search_vector @@" in query["sql"]
        ]
        assert len(searches) == 2, searches  # the k-NN and the lexical ranking
        for statement in searches:
            # Sequential scans off: this small table would otherwise be read whole.
            assert rows_read(statement, table=DOCUMENTS) == 0, statement[:120]


def test_document_filter_restricts_results_to_the_chosen_documents():
    handbook = document_create(title="Handbook", texts=LEAVE_TEXTS)
    policies = document_create(title="Policies", texts=OTHER_TEXTS)

    for mode in MODES:
        result = chunks_search(
            reader=OPERATOR,
            query="annual leave days laptops",
            top_k=10,
            mode=mode,
            document_ids=[policies.pk],
        )
        assert retrieved_documents(result) <= {policies.pk}, mode
    unfiltered = chunks_search(reader=OPERATOR, query="annual leave", top_k=10)
    assert handbook.pk in retrieved_documents(unfiltered)
    assert (
        chunks_search(reader=OPERATOR, query="annual leave", top_k=10, document_ids=[]).chunks == []
    )


def test_reciprocal_rank_fusion_rewards_agreement_and_breaks_ties_by_id():
    fused = reciprocal_rank_fusion([[30, 10, 20], [10, 40]])

    assert [item for item, _ in fused] == [10, 30, 40, 20]
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)
    # 30 and 40 are both first in one list only: equal scores, lower id first.
    assert reciprocal_rank_fusion([[40], [30]]) == [(30, 1 / 61), (40, 1 / 61)]
    assert reciprocal_rank_fusion([]) == []


def test_score_fusion_keeps_how_far_apart_the_scores_are():
    # Chunk 2 is far closer to the question and nearly as good lexically: first. Reciprocal
    # rank fusion sees one first place each, a tie, and the lower id would win.
    vector = [(2, 0.80), (1, 0.50)]
    lexical = [(1, 10.0), (2, 9.8)]
    similarity = dict(vector)

    fused = scores_fuse(vector, lexical, similarity)

    assert [cid for cid, _ in fused] == [2, 1]
    assert fused[0][1] == pytest.approx(0.80 + 0.5 * 9.8 / 10.0)
    assert reciprocal_rank_fusion([[2, 1], [1, 2]])[0][0] == 1
    # A lexical-only candidate counts with its cosine; without a lexical side, cosine alone.
    assert scores_fuse([(5, 0.4)], [(6, 2.0)], {5: 0.4, 6: 0.3})[0][0] == 6
    assert scores_fuse([(5, 0.4), (6, 0.3)], [], {5: 0.4, 6: 0.3}) == [(5, 0.4), (6, 0.3)]


PARENTAL_TEXTS = [
    "Annual leave: staff take annual leave in agreement with their manager. Leave requests "
    "for annual leave go through the leave calendar; unused leave lapses.",
    "Sick leave is paid from the first day of absence.",
    "Paternity leave lasts two weeks, taken within eight weeks of the birth.",
]


def test_rare_question_terms_outweigh_common_ones_in_the_lexical_ranking():
    """'leave' is in every chunk, 'paternity' in one: the chunk about paternity leave ranks
    first although the annual-leave chunk repeats 'leave' many times."""
    document = document_create(title="Leave policy", texts=PARENTAL_TEXTS)
    paternity = document.chunks.get(index=2).pk

    lexical = chunks_search_lexical(
        reader=OPERATOR, question="how long is paternity leave", limit=10
    )
    hybrid = chunks_search(reader=OPERATOR, query="how long is paternity leave", top_k=3)

    assert lexical[0][0] == paternity
    assert lexical[0][1] > lexical[1][1] > 0
    assert hybrid.chunks[0].chunk_id == paternity
    assert hybrid.chunks[0].lexical_rank == 1


def test_term_weights_are_inverse_document_frequencies():
    document_create(title="Leave policy", texts=PARENTAL_TEXTS)

    query = lexical_query('how long is "paternity leave" -sick', reader=OPERATOR)

    assert [term.query for term in query.terms] == ["'long'", "'patern' <-> 'leav'"]
    # 'long' is in no chunk; a phrase is held by at most as many chunks as its rarest word
    # ('patern': 1 of 3).
    assert [term.frequency for term in query.terms] == [0, 1]
    assert query.terms[1].weight == pytest.approx(math.log(4 / 1.5))
    assert query.excluded == ("!'sick'",)
    assert lexical_query("what is it and who", reader=OPERATOR) is None
    assert lexical_query("-leave", reader=OPERATOR) is None


def test_lexical_candidates_come_from_the_rarest_terms_within_the_budget():
    query = LexicalQuery(
        terms=(
            LexicalTerm(query="'rare'", frequency=3, weight=5.0),
            LexicalTerm(query="'mid'", frequency=400, weight=2.0),
            LexicalTerm(query="'common'", frequency=5000, weight=0.5),
        ),
        excluded=("!'skip'",),
    )

    assert query.candidate_query(budget=1000) == "('rare' | 'mid') & !'skip'"
    assert query.candidate_query(budget=10) == "('rare') & !'skip'"
    # The rarest term is always looked for, however many chunks hold it.
    assert query.candidate_query(budget=1) == "('rare') & !'skip'"


def test_chunks_holding_only_common_terms_are_left_out_of_the_lexical_candidates(monkeypatch):
    document = document_create(title="Leave policy", texts=PARENTAL_TEXTS)
    monkeypatch.setattr(lexical_search, "LEXICAL_CANDIDATE_BUDGET", 1)

    hits = chunks_search_lexical(reader=OPERATOR, question="paternity leave", limit=10)
    hybrid = chunks_search(reader=OPERATOR, query="paternity leave", top_k=3)

    assert [chunk_id for chunk_id, _ in hits] == [document.chunks.get(index=2).pk]
    # The vector side still brings the other chunks; their 'leave' still counts for them.
    assert len(hybrid.chunks) == 3
    assert hybrid.chunks[0].chunk_id == document.chunks.get(index=2).pk
    assert all(chunk.similarity is not None for chunk in hybrid.chunks)


def test_excluded_words_and_quoted_phrases_shape_the_lexical_matches():
    document = document_create(title="Handbook", texts=LEAVE_TEXTS + PARENTAL_TEXTS)
    by_index = {chunk.index: chunk.pk for chunk in document.chunks.all()}

    excluded = chunks_search_lexical(reader=OPERATOR, question="annual leave -unused", limit=10)
    phrase = chunks_search_lexical(reader=OPERATOR, question='"paternity leave"', limit=10)

    # Two texts mention unused leave; the other leave texts remain.
    assert {chunk_id for chunk_id, _ in excluded} == {by_index[0], by_index[3], by_index[4]}
    assert [chunk_id for chunk_id, _ in phrase] == [by_index[4]]


def test_hybrid_ranking_is_deterministic():
    document_create(title="Handbook", texts=LEAVE_TEXTS + OTHER_TEXTS)
    document_create(title="Copy", texts=LEAVE_TEXTS)

    runs = [
        [
            (c.chunk_id, c.score)
            for c in chunks_search(reader=OPERATOR, query="annual leave days", top_k=7).chunks
        ]
        for _ in range(3)
    ]

    assert runs[0] == runs[1] == runs[2]
    assert len(runs[0]) == 7


@pytest.mark.parametrize("top_k", [0, 21, -1, True, 2.5])
def test_top_k_outside_one_to_twenty_is_refused(top_k):
    with pytest.raises(ValueError, match="top_k"):
        chunks_search(reader=OPERATOR, query="annual leave", top_k=top_k)


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="mode"):
        chunks_search(reader=OPERATOR, query="annual leave", mode="fuzzy")


def test_top_k_limits_the_number_of_results():
    document_create(title="Handbook", texts=LEAVE_TEXTS + OTHER_TEXTS)
    assert len(chunks_search(reader=OPERATOR, query="leave", top_k=1).chunks) == 1
    assert len(chunks_search(reader=OPERATOR, query="leave", top_k=20).chunks) == 5


@pytest.mark.django_db(transaction=True)
def test_chunks_replaced_by_a_concurrent_reingest_never_fail_a_search(tmp_path, monkeypatch):
    import threading

    from knowledge.services import document_ingest

    path = tmp_path / "parking.md"
    path.write_text("# Parking\n\nStaff parking permits cost 40 pounds a month.\n")
    parking = document_ingest(path=path).document
    other = document_create(title="Bikes", texts=["Bicycle parking is free for staff."])
    old_ids = set(parking.chunks.values_list("pk", flat=True))
    real = retrieval._chunks_read

    def reingest_meanwhile(chunk_ids):
        # Another process replaces the document's chunks after the ranking queries found them
        # and before they are read (its own connection, committed).
        def reingest() -> None:
            try:
                path.write_text("# Parking\n\nStaff parking permits now cost 45 pounds.\n")
                assert document_ingest(path=path).action == "updated"
            finally:
                connection.close()

        thread = threading.Thread(target=reingest)
        thread.start()
        thread.join()
        return real(chunk_ids)

    monkeypatch.setattr(retrieval, "_chunks_read", reingest_meanwhile)
    result = chunks_search(reader=OPERATOR, query="staff parking permits", top_k=5)

    assert not old_ids & set(parking.chunks.values_list("pk", flat=True))  # really replaced
    returned = {chunk.chunk_id for chunk in result.chunks}
    assert not returned & old_ids
    assert returned <= set(Chunk.objects.values_list("pk", flat=True))
    assert other.pk in {chunk.document_id for chunk in result.chunks}


def test_the_question_vectors_text_reads_back_as_its_float32_values_and_signs():
    """`vector_text` writes each value with 9 significant digits: pgvector reads back the very
    float32 values (tiny, large, zero and negative zero included), and the database quantises
    their signs as it does each row's `vector_bits`."""
    rng = np.random.default_rng(7)
    vectors = [rng.standard_normal(embedding.DIMENSIONS).astype(np.float32) for _ in range(20)]
    scales = [np.float32(10.0**power) for power in (-30, -7, 5)]
    vectors += [vector * scale for scale in scales for vector in vectors[:3]]
    vectors[0][:4] = [0.0, -0.0, np.float32(1e-45), np.float32(-3.4e38)]
    with connection.cursor() as cursor:
        for vector in vectors:
            text = vector_text(vector)
            cursor.execute("SELECT %s::vector, binary_quantize(%s::vector)::text", [text, text])
            stored, signs = cursor.fetchone()
            # pgvector writes each float32 in its shortest form, which reads back exactly.
            values = np.asarray(stored.strip("[]").split(","), dtype=np.float64)
            assert np.array_equal(values.astype(np.float32), vector)
            assert signs == "".join("1" if value > 0 else "0" for value in vector.tolist())
