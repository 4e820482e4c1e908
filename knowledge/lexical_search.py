"""The lexical side of retrieval: the question's terms (PostgreSQL's websearch parse, OR-ed)
weighted by their inverse document frequency (knowledge/vocabulary.py), the candidates limited
to the chunks holding its rarest terms (LEXICAL_CANDIDATE_BUDGET); a chunk scores the summed
weights of the terms it holds."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection

from knowledge.access import Reader, rows_searchable_sql
from knowledge.models import Chunk
from knowledge.search_scope import reader_required
from knowledge.sql_arrays import bigint_array
from knowledge.vocabulary import Vocabulary, text_search_parse, vocabulary_get

# Lexical candidates: the chunks holding the question's rarest terms, as many terms as hold
# together at most this many chunks (the cost of the lexical side grows with it).
LEXICAL_CANDIDATE_BUDGET = 1000
_LEXEME = re.compile(r"'((?:[^']|'')*)'")


@dataclass(frozen=True)
class LexicalTerm:
    """One top-level item of the question's full-text query: a lexeme, a quoted phrase or an
    `or` group, as raw tsquery text."""

    query: str
    frequency: int  # searchable chunks holding it (an upper bound for phrases and groups)
    weight: float  # its inverse document frequency


@dataclass(frozen=True)
class LexicalQuery:
    terms: tuple[LexicalTerm, ...]  # rarest first
    excluded: tuple[str, ...]  # `-word` items, raw tsquery text starting with "!"

    def candidate_query(self, budget: int | None = None) -> str:
        """The rarest terms, as many as hold together at most `budget` chunks (default
        LEXICAL_CANDIDATE_BUDGET; always at least one term), OR-ed; exclusions AND-ed."""
        budget = LEXICAL_CANDIDATE_BUDGET if budget is None else budget
        chosen, total = [], 0
        for term in self.terms:
            if chosen and total + term.frequency > budget:
                break
            chosen.append(term.query)
            total += term.frequency
        return _with_exclusions(" | ".join(chosen), self.excluded)

    def score_sql(self, column: str) -> tuple[str, list]:
        """SQL for a chunk's lexical score (the summed weights of the terms its `column`
        matches; 0 when it holds an excluded term) and its parameters."""
        parts = " + ".join(
            f"({column} @@ to_tsquery('simple', %s))::int * %s::float8" for _ in self.terms
        )
        params: list = [value for term in self.terms for value in (term.query, term.weight)]
        if not self.excluded:
            return f"({parts})", params
        sql = f"(CASE WHEN {column} @@ to_tsquery('simple', %s) THEN {parts} ELSE 0 END)"
        return sql, [" & ".join(self.excluded), *params]


def _with_exclusions(text: str, excluded: Sequence[str]) -> str:
    return f"({text}) & " + " & ".join(excluded) if excluded else text


def _websearch_items(question: str) -> tuple[list[str], list[str]]:
    """The top-level items of websearch_to_tsquery's parse: (wanted, excluded)."""
    parsed = text_search_parse(question).websearch
    # The top level of websearch's output is joined by " & " (phrases use <->, "or" gives |).
    items = list(dict.fromkeys(item for item in (parsed or "").split(" & ") if item))
    wanted = [item for item in items if not item.startswith("!")]
    excluded = [item for item in items if item.startswith("!")]
    return wanted, excluded


def lexical_query(
    question: str, *, reader: Reader, vocabulary: Vocabulary | None = None
) -> LexicalQuery | None:
    """The question's full-text terms weighted by the document frequencies of what `reader`
    may search (knowledge/vocabulary.py);
    None when it has no term to look for (only stop words or only exclusions).

    A phrase is held by at most as many chunks as its rarest word, an `or` group by at most
    the sum of its words' chunks; the weight is ln((N + 1) / (frequency + 0.5)) over the N
    searchable chunks (the vocabulary's idf).
    """
    wanted, excluded = _websearch_items(question)
    if not wanted:
        return None
    vocabulary = vocabulary or vocabulary_get(reader=reader)
    terms = []
    for item in wanted:
        frequencies = [
            vocabulary.frequency(lexeme.replace("''", "'")) for lexeme in _LEXEME.findall(item)
        ] or [0]
        frequency = sum(frequencies) if " | " in item else min(frequencies)
        terms.append(
            LexicalTerm(
                query=item, frequency=frequency, weight=vocabulary.idf_of_frequency(frequency)
            )
        )
    terms.sort(key=lambda term: (term.frequency, term.query))
    return LexicalQuery(terms=tuple(terms), excluded=tuple(excluded))


def chunks_search_lexical(
    *,
    question: str,
    limit: int,
    reader: Reader,
    document_ids: Sequence[int] | None = None,
    query: LexicalQuery | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, lexical score) best first: the summed inverse document frequencies of the
    question's terms each chunk holds, among the chunks `reader` may search
    (`knowledge.access.rows_searchable_sql`), of `document_ids` when given.

    The candidates are the chunks holding one of the question's rarest terms (as many terms,
    rarest first, as hold together at most LEXICAL_CANDIDATE_BUDGET chunks); every term counts
    in their score. A chunk holding only common words scores too little to matter, and
    leaving them out keeps the cost bounded on a large knowledge base. The statement is
    written out, not built with the ORM: it runs for every question
    (docs/decisions/0152-statements-written-out.md).
    """
    reader_required(reader)
    if document_ids is not None and not document_ids:
        return []
    query = query or lexical_query(question, reader=reader)
    if query is None:
        return []
    table = Chunk._meta.db_table
    # The lexemes are already stemmed by the english parse; "simple" keeps them as they are
    # (re-parsing with "english" would drop stems that happen to be stop words: "other").
    score_sql, score_params = query.score_sql(f"{table}.search_vector")
    searchable, params = rows_searchable_sql(reader=reader, alias=table)
    where = searchable
    if document_ids is not None:
        where += f" AND {table}.document_id = ANY(%s::bigint[])"
        params.append(bigint_array(sorted(int(pk) for pk in document_ids)))
    sql = (
        f"SELECT {table}.id, {score_sql} AS rank FROM {table} WHERE {where} "
        f"AND {table}.search_vector @@ to_tsquery('simple'::regconfig, %s) "
        f"ORDER BY 2 DESC, 1 ASC LIMIT {int(limit)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*score_params, *params, query.candidate_query()])
        rows = cursor.fetchall()
    return [(chunk_id, float(rank)) for chunk_id, rank in rows]
