"""Revocation across web processes: two real daphne processes serve the same database; a reader
removed from the collection's group loses the restricted document on the next request to
either of them, though both had just served it (nothing about readers is kept per process)."""

from __future__ import annotations

import httpx
import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test import Client

from knowledge.collections import collection_create
from tests.support.knowledge_base import LEAVE_TEXTS, document_create
from tests.support.live_server import daphne_server, database_url_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PAY_TEXT = "The salary band for a Grade 7 analyst is 41,200 to 48,900 pounds a year."
SECRET = "48,900"


def reads(base: str, cookie: str, pay_id: int) -> dict[str, bool]:
    """What the session reads of the restricted document on the server at `base`."""
    headers = {"Cookie": cookie}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        search = client.get("/api/search", params={"q": "Grade 7 salary band", "mode": "lexical"})
        listing = client.get("/api/documents")
        page = client.get(f"/documents/{pay_id}/")
    assert search.status_code == listing.status_code == 200
    return {
        "search": SECRET in search.text,
        "list": "Pay bands" in listing.text,
        "page": page.status_code == 200 and SECRET in page.text,
    }


def test_a_reader_removed_from_the_group_loses_access_in_every_process_at_once(
    django_user_model,
):
    hr = Group.objects.create(name="HR")
    member = django_user_model.objects.create_user("hr-member", password="x", is_staff=True)
    member.groups.add(hr)
    collection = collection_create(name="HR only", groups=[hr])
    document_create(title="Staff handbook", texts=LEAVE_TEXTS)
    pay = document_create(title="Pay bands", texts=[PAY_TEXT], collection=collection)
    browser = Client()
    browser.force_login(member)
    cookie = f"sessionid={browser.cookies['sessionid'].value}"
    url = database_url_of(connection.settings_dict)
    env = {"EMBEDDING_WARM_UP": "0"}

    with daphne_server(url, env=env) as first, daphne_server(url, env=env) as second:
        everything = {"search": True, "list": True, "page": True}
        assert reads(first, cookie, pay.pk) == everything
        assert reads(second, cookie, pay.pk) == everything

        member.groups.remove(hr)

        nothing = {"search": False, "list": False, "page": False}
        assert reads(second, cookie, pay.pk) == nothing
        assert reads(first, cookie, pay.pk) == nothing
