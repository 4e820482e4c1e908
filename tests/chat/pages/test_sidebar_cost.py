"""The sidebar's statement (`conversation_groups_for` with a limit, rendered after every
answer) reads the conversations it shows and no others: its work does not grow with the
conversations other people keep private (docs/decisions/0177-the-sidebar-reads-what-it-shows.md)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from chat.models import Conversation
from chat.selectors import _SIDEBAR_SQL, conversation_groups_for
from tests.support.statements import rows_read

pytestmark = pytest.mark.django_db

LIMIT = 20


def _conversations_read(user) -> int | None:
    """The conversation rows the sidebar's statement reads for `user` (`rows_read`, sequential
    scans off: a table this small would otherwise be read whole, as a deployment's is not)."""
    return rows_read(_SIDEBAR_SQL, [LIMIT, user.pk, LIMIT], table=Conversation._meta.db_table)


def test_the_sidebar_reads_the_conversations_it_shows_and_no_others():
    """A reader with many shared conversations and few private ones, among others' private
    ones: the statement reads the newest LIMIT shared ones and the reader's own private ones."""
    users = get_user_model().objects
    reader = users.create_user(username="reader", is_staff=True)
    others = [users.create_user(username=f"other{n}", is_staff=True) for n in range(4)]
    Conversation.objects.bulk_create(
        [Conversation(owner=reader, title=f"shared {n}") for n in range(1000)]
        + [Conversation(owner=reader, title=f"mine {n}", is_private=True) for n in range(3)]
        + [
            Conversation(owner=other, title=f"theirs {n}", is_private=True)
            for other in others
            for n in range(250)
        ]
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {Conversation._meta.db_table}")

    shared, private = conversation_groups_for(reader, limit=LIMIT)

    assert len(shared) == LIMIT and {c.title for c in private} == {f"mine {n}" for n in range(3)}
    # The newest LIMIT shared ones and the reader's 3 (a sort by time then creation reads a
    # row or a tie past the last it keeps); with conv_privacy_updated it read 3,027.
    assert LIMIT + 3 <= _conversations_read(reader) < 2 * (LIMIT + 3)
