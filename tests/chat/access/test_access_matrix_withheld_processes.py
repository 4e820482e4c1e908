"""Revocation across web processes (docs/decisions/0080-withheld-answers.md): a reader removed
from the collection's group no longer reads the answer on their next request to either of two
daphne processes, each of which had rendered (and kept, docs/decisions/0046-render-cache.md)
the conversation for them before. No restart, nothing to invalidate."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from django.contrib.auth.models import Group
from django.test import Client

from chat.models import Conversation
from knowledge.collections import collection_create
from tests.support.conversations import exchange_create
from tests.support.knowledge_base import basis, document_create
from tests.support.live_server import daphne_server, database_url_of

pytestmark = pytest.mark.django_db(transaction=True)

RESTRICTED_CHUNK = "The Quetzal band for Grade 7 analysts runs from 41,000 to 48,000 pounds."
RESTRICTED_ANSWER = "Grade 7 analysts are paid on the Quetzal band, 41,000 to 48,000 pounds. [1]"
SECRET = "Quetzal"


@pytest.fixture(scope="module")
def servers(django_db_setup) -> Iterator[tuple[str, str]]:
    from django.db import connection

    database_url = database_url_of(connection.settings_dict)
    with daphne_server(database_url) as first, daphne_server(database_url) as second:
        yield first, second


def test_a_reader_removed_from_the_group_loses_the_answer_in_every_process(
    servers, django_user_model
):
    hr = Group.objects.create(name="HR")
    asker = django_user_model.objects.create_user(username="asker", is_staff=True)
    reader = django_user_model.objects.create_user(username="reader", is_staff=True)
    asker.groups.add(hr)
    reader.groups.add(hr)
    document = document_create(
        title="Pay bands",
        texts=[RESTRICTED_CHUNK],
        vectors=[basis(0)],
        collection=collection_create(name="HR only", groups=[hr]),
    )
    conversation = Conversation.objects.create(owner=asker, title="Pay")
    exchange_create(
        conversation, question="Pay?", answer=RESTRICTED_ANSWER, cited=[document.chunks.get()]
    )
    client = Client()
    client.force_login(reader)
    cookies = {"sessionid": client.cookies["sessionid"].value}

    def bodies() -> list[str]:
        return [
            httpx.get(f"{url}{path}", cookies=cookies, timeout=30).text
            for url in servers
            for path in (f"/c/{conversation.pk}/", f"/api/conversations/{conversation.pk}/messages")
        ]

    assert all(SECRET in body for body in bodies())
    assert all(SECRET in body for body in bodies())  # the second time, from each one's cache

    reader.groups.remove(hr)

    after = bodies()
    assert not any(SECRET in body for body in after)
    assert all("draws on documents you don" in body for body in after)
