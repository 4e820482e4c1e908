"""Arrays passed as one text parameter (`knowledge.sql_arrays`) read back in PostgreSQL as the
very values psycopg's own adaptation of the list gives."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from django.db import connection

from knowledge.sql_arrays import bigint_array, text_array, uuid_array

pytestmark = pytest.mark.django_db

INTEGERS = [
    [],
    [7],
    [3, 1, 2],
    [0, -1, -(2**63), 2**63 - 1],
    [np.int64(42), np.int32(-5), True],
]
TEXTS = [
    [],
    [""],
    ["view_document", "change_document"],
    ['a "quoted" word', "back\\slash", "trailing\\", "comma, and {braces}", "NULL", "null"],
    ["  spaces at both ends  ", "tab\tand\nnewline", "ünïcödé – ✓", "'single' quotes", "a''b"],
    ["0" * 64, "f" * 64],
]


def _read_back(sql_type: str, text: str, values: list) -> tuple[list, bool]:
    """The array PostgreSQL reads from `text`, and whether it equals the one psycopg sends
    for `values` as a list."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT %s::{sql_type}[], %s::{sql_type}[] IS NOT DISTINCT FROM %s::{sql_type}[]",
            [text, text, values],
        )
        return cursor.fetchone()


@pytest.mark.parametrize("values", INTEGERS)
def test_an_integer_array_reads_back_as_its_values(values):
    read, same = _read_back("bigint", bigint_array(values), [int(v) for v in values])
    assert read == [int(v) for v in values]
    assert same


@pytest.mark.parametrize("values", TEXTS)
def test_a_text_array_reads_back_as_its_values_whatever_they_hold(values):
    read, same = _read_back("text", text_array(values), values)
    assert read == values
    assert same


def test_a_uuid_array_reads_back_as_its_values_given_as_uuids_or_text():
    ids = [uuid.uuid4() for _ in range(3)]
    read, same = _read_back("uuid", uuid_array([ids[0], str(ids[1]), ids[2].hex]), ids)
    assert read == ids
    assert same
    assert _read_back("uuid", uuid_array([]), [])[0] == []


@pytest.mark.parametrize(
    "make, values",
    [
        (bigint_array, ["1; DROP TABLE knowledge_chunk"]),
        (bigint_array, ["1,2"]),
        (bigint_array, [None]),
        (bigint_array, [1.5j]),
        (uuid_array, ["not-a-uuid"]),
        (uuid_array, ['"}, 1)--']),
        (text_array, ["nul \x00 inside"]),
    ],
)
def test_a_value_that_is_not_of_the_arrays_type_is_refused_before_any_sql(make, values):
    with pytest.raises((TypeError, ValueError)):
        make(values)


def test_a_text_array_keeps_a_hostile_element_one_element():
    """An element written to break out of the array or the statement stays one text."""
    hostile = ['"}', "'); DROP TABLE knowledge_chunk; --", '\\"', "{a,b}", '","']
    read, same = _read_back("text", text_array(hostile), hostile)
    assert read == hostile
    assert same
