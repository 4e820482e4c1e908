"""The knowledge base's vocabulary (PostgreSQL full-text lexemes of searchable chunks) and the
terms of a question measured against it."""

from __future__ import annotations

import math
import threading

import pytest
from django.db import connection

from knowledge import vocabulary
from knowledge.access import OPERATOR, reader_for
from knowledge.models import Chunk, Document
from knowledge.vocabulary import edits1, fold, question_terms, vocabulary_get
from tests.support.knowledge_base import document_create

pytestmark = pytest.mark.django_db

BROADCAST = [
    "BSkyB charged additional subscription fees for its high-definition service.",
    "The Premier League broadcasting rights were awarded to Sky and Setanta Sports.",
    "Parliament heard that a subscription to the service was too expensive.",
]
STEAM = [
    "The steam engine used the pressure of steam to push a piston.",
    "Watt improved the steam engine with a separate condenser in 1765.",
]
POLITICS = ["Thomas de Maizière served as Federal Minister of the Interior."]


@pytest.fixture(autouse=True)
def fresh_cache():
    vocabulary.vocabulary_forget()
    yield
    vocabulary.vocabulary_forget()


def terms_by_token(question: str) -> dict[str, vocabulary.QuestionTerm]:
    return {term.token: term for term in question_terms(question, reader=OPERATOR).terms}


def test_vocabulary_holds_the_stemmed_lexemes_of_searchable_chunks_with_their_frequency():
    document_create(title="Broadcast", texts=BROADCAST)
    document_create(title="Steam", texts=STEAM)

    vocab = vocabulary_get(reader=OPERATOR)

    assert vocab.chunk_count == 5
    assert vocab.frequency("steam") == 2  # in both steam chunks (counted once per chunk)
    assert vocab.frequency("subscript") == 2  # "subscription", stemmed as the FTS stems it
    assert vocab.knows("servic") and vocab.knows("premier")
    assert not vocab.knows("the")  # stop words are not lexemes
    assert vocab.idf("steam") == pytest.approx(math.log(6 / 2.5))
    assert vocab.idf("fresno") == pytest.approx(vocab.max_idf) == pytest.approx(math.log(6 / 0.5))


def test_disabled_and_unready_documents_are_not_part_of_the_vocabulary():
    document_create(title="Steam", texts=STEAM)
    document_create(title="Broadcast", texts=BROADCAST, enabled=False)
    document_create(title="Politics", texts=POLITICS, status=Document.Status.PROCESSING)

    vocab = vocabulary_get(reader=OPERATOR)

    assert vocab.chunk_count == 2
    assert vocab.knows("piston")
    assert not vocab.knows("bskyb") and not vocab.knows("minist")


def test_the_cached_vocabulary_is_reused_until_the_knowledge_base_changes(
    django_assert_num_queries,
):
    steam = document_create(title="Steam", texts=STEAM)
    first = vocabulary_get(reader=OPERATOR)
    with django_assert_num_queries(0):  # trusted for RECHECK_SECONDS
        assert vocabulary_get(reader=OPERATOR) is first
    with django_assert_num_queries(1):  # then the fingerprint only
        assert vocabulary_get(reader=OPERATOR, wait=True) is first
    vocabulary.vocabulary_recheck()  # the fingerprint is read again, nothing is rebuilt
    with django_assert_num_queries(1):
        assert vocabulary_get(reader=OPERATOR) is first

    broadcast = document_create(title="Broadcast", texts=BROADCAST)
    added = vocabulary_get(reader=OPERATOR, wait=True)
    assert added is not first and added.knows("bskyb") and added.chunk_count == 5

    Document.objects.filter(pk=broadcast.pk).update(enabled=False)  # no save(), no updated_at
    disabled = vocabulary_get(reader=OPERATOR, wait=True)
    assert not disabled.knows("bskyb") and disabled.chunk_count == 2

    # Re-ingesting replaces the chunks: new rows, new ids.
    steam.chunks.all().delete()
    Chunk.objects.create(
        document=steam, index=0, text="A locomotive pulled the train.", text_hash="x"
    )
    replaced = vocabulary_get(reader=OPERATOR, wait=True)
    assert replaced.knows("locomot") and not replaced.knows("piston")

    steam.delete()
    assert vocabulary_get(reader=OPERATOR, wait=True).chunk_count == 0


def test_a_readers_fingerprint_follows_chunks_rewritten_and_reads_no_chunk_but_the_newest(
    staff_user,
):
    """The fingerprint of a reader's collections changes when a document's chunks are written
    anew (with no save of the document), and its plan probes each document for its newest
    chunk (a LIMIT 1 per document, which the (document, id) index serves on a large table;
    docs/decisions/0153-postgresql-per-statement.md) instead of joining every chunk."""
    steam = document_create(title="Steam", texts=STEAM)
    document_create(title="Broadcast", texts=BROADCAST)
    reader = reader_for(staff_user)  # after the documents: their collection exists
    scope = vocabulary.vocabulary_scope(reader)
    assert scope is not None  # a reader's collections, not every collection
    before = vocabulary.knowledge_base_fingerprint(scope)
    assert before == vocabulary.knowledge_base_fingerprint(scope)

    steam.chunks.all().delete()
    Chunk.objects.create(document=steam, index=0, text="A locomotive pulled it.", text_hash="x")
    after = vocabulary.knowledge_base_fingerprint(scope)
    assert after != before and after[-1] == Chunk.objects.latest("pk").pk

    condition = vocabulary._scope_sql(scope)
    sql = vocabulary._MAX_CHUNK_IN_SCOPE_SQL.format(scope=condition)
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # tiny tables: as on a large one
        cursor.execute(f"EXPLAIN SELECT {sql}")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Nested Loop" in plan and "Limit" in plan, plan  # one probe per document
    assert "Seq Scan on knowledge_chunk" not in plan and "Hash Join" not in plan, plan
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'chunk_document_newest'")
        assert "(document_id, id)" in cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_a_changed_knowledge_base_is_rebuilt_in_the_background_while_the_old_one_serves(
    monkeypatch,
):
    monkeypatch.setattr(vocabulary, "RECHECK_SECONDS", 0.0)
    document_create(title="Steam", texts=STEAM)
    old = vocabulary_get(reader=OPERATOR)
    document_create(title="Broadcast", texts=BROADCAST)

    served = vocabulary_get(
        reader=OPERATOR
    )  # the fingerprint changed: the old vocabulary answers at once

    assert served is old and not served.knows("bskyb")
    for thread in threading.enumerate():
        if thread.name == "vocabulary-rebuild":
            thread.join(timeout=60)
    rebuilt = vocabulary_get(reader=OPERATOR)
    assert rebuilt is not old and rebuilt.knows("bskyb") and rebuilt.chunk_count == 5


def test_question_terms_are_parsed_and_stemmed_like_the_full_text_search():
    document_create(title="Broadcast", texts=BROADCAST)

    terms = question_terms("Which services did BSkyB charge subscriptions for?", reader=OPERATOR)

    assert [term.lexeme for term in terms.terms] == ["servic", "bskyb", "charg", "subscript"]
    assert all(term.known for term in terms.terms)
    assert terms.unknown == [] and terms.unknown_share == 0.0


def test_a_misspelt_known_word_is_excused_as_a_typo_of_it():
    document_create(title="Broadcast", texts=BROADCAST)

    terms = question_terms(
        "What additional srevice did the UK parliment hear about?", reader=OPERATOR
    )
    by_token = {term.token: term for term in terms.terms}

    assert by_token["srevice"].near == "servic" and by_token["srevice"].typo
    assert by_token["parliment"].near == "parliament" and by_token["parliment"].typo
    assert {term.token for term in terms.near_known} == {"srevice", "parliment"}
    assert "srevice" not in {term.token for term in terms.unknown}


def test_an_english_word_the_knowledge_base_lacks_is_unknown_even_one_letter_from_a_known_one():
    document_create(title="Broadcast", texts=BROADCAST)  # holds "heard" → "heard", not "hear"
    document_create(title="Steam", texts=["The new engine brought higher pressure."])

    by_token = terms_by_token("How long did the drought last?")

    drought = by_token["drought"]
    assert drought.near == "brought"  # one edit away...
    assert drought.word_pieces == 1 and not drought.typo  # ...but a real word, not a typo
    assert not drought.specific  # lower case, one piece: a common word


def test_names_and_jargon_the_knowledge_base_lacks_are_unknown_and_specific():
    document_create(title="Broadcast", texts=BROADCAST)

    terms = question_terms(
        "Which company provides train service in Fresno to ctenophora?", reader=OPERATOR
    )

    specific = {term.token for term in terms.unknown_specific}
    assert specific == {"Fresno", "ctenophora"}
    assert {term.token for term in terms.unknown} == {"company", "provides", "train"} | specific
    # "service" is known, everything else unknown: the share is the unknown terms' IDF weight.
    assert 0.8 < terms.unknown_share < 1.0


def test_function_words_typed_without_their_apostrophe_are_not_terms():
    """Words such as "dont", "whats" and "cos" are how people type to a chat. No document holds
    them and the tokenizer splits them, so they were unknown *specific* terms, and the evidence
    check refused the question as naming something the documents lack."""
    document_create(title="Broadcast", texts=BROADCAST)

    casual = question_terms("whats the train service, dont need it cos im away", reader=OPERATOR)
    written = question_terms("What's the train service? I don't need it.", reader=OPERATOR)

    assert {term.token for term in casual.terms} == {"train", "service", "need", "away"}
    assert not casual.unknown_specific
    assert {term.token for term in written.terms} == {"train", "service", "need"}


def test_capitals_count_only_in_ordinary_sentence_case():
    document_create(title="Broadcast", texts=BROADCAST)

    shouted = question_terms("WHICH COMPANY PROVIDES TRAIN SERVICE IN FRESNO", reader=OPERATOR)
    titled = question_terms("Which Company Provides Train Service In Fresno", reader=OPERATOR)
    normal = question_terms("Which company provides train service in Fresno", reader=OPERATOR)

    assert not any(term.capitalized for term in shouted.terms)
    assert not any(term.capitalized for term in titled.terms)
    assert [term.token for term in normal.terms if term.capitalized] == ["Fresno"]


def test_the_first_word_is_not_taken_for_a_name():
    document_create(title="Broadcast", texts=BROADCAST)

    assert not terms_by_token("Company rules about trains?")["Company"].capitalized


def test_the_first_word_of_every_sentence_is_not_taken_for_a_name():
    document_create(title="Broadcast", texts=BROADCAST)

    terms = terms_by_token("What are the rules about trains? Please explain them for Fresno.")
    assert not terms["Please"].capitalized
    assert terms["Fresno"].capitalized


def test_numbers_and_hyphenated_compounds_are_not_counted_as_unknown():
    document_create(title="Steam", texts=STEAM)

    terms = question_terms(
        "Was the steam-powered engine improved in 1851-1860 or 10000 times?", reader=OPERATOR
    )

    assert "steam-pow" not in {term.lexeme for term in terms.terms}  # parts count instead
    assert {"steam", "power", "engin"} <= {term.lexeme for term in terms.terms}
    assert {term.token for term in terms.terms if term.numeric} >= {"1851", "10000"}
    assert all(not term.numeric for term in terms.unknown)


def test_accents_are_folded_on_both_sides():
    document_create(title="Politics", texts=POLITICS)

    maiziere = terms_by_token("What did Thomas de Maiziere serve as?")["Maiziere"]

    assert maiziere.known and maiziere.frequency == 1
    assert fold("Maizière") == "maiziere"


def test_short_unknown_words_are_never_excused_as_typos():
    document_create(title="Steam", texts=STEAM)

    assert (
        vocabulary_get(reader=OPERATOR).nearest("wat") is None
    )  # "watt" is one edit away, but too short
    assert vocabulary_get(reader=OPERATOR).nearest("pistn") == "piston"


def test_edits1_gives_every_single_damerau_edit():
    edits = set(edits1("abc"))

    assert {"bc", "ac", "ab"} <= edits  # deletions
    assert {"bac", "acb"} <= edits  # transpositions
    assert {"xbc", "axc", "abx"} <= edits  # substitutions
    assert {"xabc", "abxc", "abcx"} <= edits  # insertions
    assert "abc" not in edits and "cab" not in edits


def test_an_empty_knowledge_base_knows_nothing():
    terms = question_terms("What is the refund policy?", reader=OPERATOR)

    assert vocabulary_get(reader=OPERATOR).chunk_count == 0
    assert [term.known for term in terms.terms] == [False, False]
    assert terms.unknown_share == 1.0
