"""The statements prepared once per connection (knowledge/sql_prepared.py): the Reader's and
the earlier turns' are prepared the first time they run on a connection and reused after, give
what the unprepared statement gives, and are not prepared when settings.DB_PREPARED_STATEMENTS
is off."""

from __future__ import annotations

import json
import os

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext

from chat.models import Conversation
from chat.turns import conversation_turns_before
from knowledge.access import reader_for
from knowledge.collections import collection_create
from tests.support.conversations import exchange_create
from tests.support.embedded_server import python_run

pytestmark = pytest.mark.django_db

# Fragments of the two statements' text (knowledge.access._reader_sql, chat.turns).
READER = "WHERE owner_id IS NOT NULL AND owner_id <> u.id"
TURNS = "ORDER BY created_at DESC, id DESC LIMIT"


def _prepared(fragment: str) -> list[int]:
    """How many times each statement prepared on this connection whose text holds `fragment`
    has been run (its custom and generic plans)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT generic_plans + custom_plans FROM pg_prepared_statements "
            "WHERE strpos(statement, %s) > 0",
            [fragment],
        )
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def reader_user():
    user = get_user_model().objects.create_user("prepared-reader", password=None, is_staff=True)
    group = Group.objects.create(name="prepared readers")
    user.groups.add(group)
    collection_create(name="Prepared", groups=[group])
    return user


def test_the_readers_statement_is_prepared_once_and_reused(reader_user):
    first = reader_for(reader_user)
    assert _prepared(READER) == [1]
    assert reader_for(reader_user) == first
    assert reader_for(reader_user) == first
    assert _prepared(READER) == [3]  # the one prepared statement, run three times


def test_the_query_log_holds_the_statement_with_its_values(reader_user):
    with CaptureQueriesContext(connection) as queries:
        reader_for(reader_user)
    logged = [query["sql"] for query in queries if READER in (query["sql"] or "")]
    assert len(logged) == 1 and f"WHERE u.id = {reader_user.pk}" in logged[0]


def test_a_prepared_reader_sees_a_change_at_once(reader_user):
    before = reader_for(reader_user)
    reader_user.groups.clear()
    after = reader_for(reader_user)
    assert len(before.collection_ids) == len(after.collection_ids) + 1
    assert _prepared(READER) == [2]


def test_the_earlier_turns_statement_is_prepared_once_and_reused(reader_user):
    conversation = Conversation.objects.create(owner=reader_user)
    for n in range(3):
        exchange_create(conversation, question=f"Question {n}?", answer=f"Answer {n}.")
    asked, _ = exchange_create(conversation, question="And then?", answer="")
    asker = reader_for(reader_user)
    turns = conversation_turns_before(asked, limit=2, asker=asker)
    assert [turn.answer for turn in turns] == ["Answer 1.", "Answer 2."]
    assert conversation_turns_before(asked, limit=2, asker=asker) == turns
    assert _prepared(TURNS) == [2]


def test_with_prepared_statements_off_nothing_is_prepared_and_the_reader_is_the_same(
    reader_user,
):
    connection.ensure_connection()
    raw = connection.connection
    threshold = raw.prepare_threshold
    raw.prepare_threshold = None  # what Django's default OPTIONS give the connection
    try:
        unprepared = reader_for(reader_user)
        assert reader_for(reader_user) == unprepared
        assert _prepared(READER) == []
    finally:
        raw.prepare_threshold = threshold
    assert reader_for(reader_user) == unprepared
    assert _prepared(READER) == [1]


@pytest.mark.parametrize(("value", "threshold"), [(None, 2**31 - 1), ("0", None)])
def test_the_setting_gives_the_connections_their_threshold(value, threshold):
    env = {k: v for k, v in os.environ.items() if k != "DB_PREPARED_STATEMENTS"}
    # Settings only: a URL that is parsed, never connected to.
    env["DATABASE_URL"] = "postgresql://nobody@localhost:1/nothing"
    if value is not None:
        env["DB_PREPARED_STATEMENTS"] = value
    script = (
        "import json, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'config.settings'; "
        "from django.conf import settings; "
        "print(json.dumps(settings.DATABASES['default']['OPTIONS'].get('prepare_threshold')))"
    )
    assert json.loads(python_run(["-c", script], env)) == threshold
