"""The document page's `chunk` parameter is a client integer
(docs/decisions/0103-client-integers.md): a Unicode digit or an enormous number highlights
nothing, never a 500."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.support.knowledge_base import LEAVE_TEXTS, document_create


@pytest.mark.django_db
@pytest.mark.parametrize("chunk", ["²", "١", "9" * 30, "-1", "x"])
def test_a_malformed_chunk_parameter_highlights_nothing(staff_user, chunk):
    document = document_create(title="Staff handbook", texts=LEAVE_TEXTS)
    client = Client()
    client.force_login(staff_user)
    response = client.get(f"/documents/{document.pk}/", {"chunk": chunk})
    assert response.status_code == 200
    assert "Staff handbook" in response.content.decode()


@pytest.mark.django_db
def test_a_plain_chunk_parameter_still_highlights_it(staff_user):
    document = document_create(title="Staff handbook", texts=LEAVE_TEXTS)
    chunk = document.chunks.order_by("index").first()
    client = Client()
    client.force_login(staff_user)
    response = client.get(f"/documents/{document.pk}/", {"chunk": f"{chunk.pk}"})
    assert response.context["highlighted"] == chunk.pk
