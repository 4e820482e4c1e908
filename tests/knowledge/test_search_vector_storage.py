"""A chunk's `search_vector` stays in its row, also for the longest chunks the chunker makes: the
lexical ranking scores each candidate term by term, and a vector out of line in the TOAST table
would be fetched from it again for every term (docs/decisions/0172-the-search-vector-in-its-row.md).
"""

from __future__ import annotations

import pytest
from django.db import connection

from knowledge.access import OPERATOR
from knowledge.lexical_search import chunks_search_lexical
from knowledge.models import Chunk
from tests.support.knowledge_base import document_create
from tests.support.migrations import migrate, migrate_to_latest

pytestmark = pytest.mark.django_db

# One paragraph near the chunker's limit (256 word pieces): its text and its vector together
# are over the 2 kB a row keeps in line before PostgreSQL moves or compresses values.
LONG_PARAGRAPH = (
    "Employees travelling abroad on company business must book flights through the approved "
    "agency, choose the lowest logical fare, and keep boarding passes, hotel folios, taxi "
    "receipts and meal invoices for reimbursement within thirty days of returning. Per diem "
    "allowances differ by destination: the finance handbook lists Brussels, Copenhagen, "
    "Dublin, Helsinki, Lisbon, Madrid, Oslo, Prague, Stockholm, Vienna, Warsaw and Zurich "
    "with separate breakfast, lunch and dinner ceilings. Business class is permitted only for "
    "uninterrupted journeys exceeding nine hours, or when a physician certifies a medical "
    "need. Rail is preferred below four hours door to door; rental cars require a manager's "
    "written approval, comprehensive insurance, and refuelling before return. Loyalty points "
    "may be kept personally, yet never influence supplier choice. Visa fees, vaccinations, "
    "roaming bundles and airport lounge passes are reimbursable; minibar charges, laundry "
    "beyond five nights, cinema tickets and spouse companions are not. Travellers must "
    "register itineraries with the security desk, carry the emergency assistance card, and "
    "report lost passports, stolen laptops or injuries within twenty four hours."
)


def _storage_of(pk: int) -> tuple[int, bool, bool]:
    """The chunk's search_vector: its size, whether it is stored out of line, whether compressed."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_column_size(search_vector), "
            "pg_column_toast_chunk_id(search_vector) IS NOT NULL, "
            "pg_column_compression(search_vector) IS NOT NULL "
            "FROM knowledge_chunk WHERE id = %s",
            [pk],
        )
        return cursor.fetchone()


def test_the_longest_chunks_keep_their_search_vector_in_the_row():
    document = document_create(title="Travel policy", texts=[LONG_PARAGRAPH])
    chunk = Chunk.objects.get(document=document)

    size, out_of_line, compressed = _storage_of(chunk.pk)

    assert len(chunk.text.encode()) + size > 2048  # long enough to be moved under EXTENDED
    assert not out_of_line
    assert not compressed
    hits = chunks_search_lexical(
        question="Are minibar charges reimbursed?", limit=5, reader=OPERATOR
    )
    assert [chunk_id for chunk_id, _ in hits] == [chunk.pk]


def test_the_column_is_stored_main():
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT attstorage FROM pg_attribute "
            "WHERE attrelid = 'knowledge_chunk'::regclass AND attname = 'search_vector'"
        )
        assert cursor.fetchone() == ("m",)


@pytest.mark.django_db(transaction=True)
def test_the_migration_brings_vectors_stored_out_of_line_back_into_their_rows(
    latest_schema_after,
):
    # The column back to EXTENDED, and a chunk written with that state's models.
    old_apps = migrate([("knowledge", "0016_chunk_document_newest")])
    document = old_apps.get_model("knowledge", "Document").objects.create(
        title="Travel policy", source="travel.md", status="ready"
    )
    chunk = old_apps.get_model("knowledge", "Chunk").objects.create(
        document=document, index=0, text=LONG_PARAGRAPH
    )
    assert _storage_of(chunk.pk)[1]  # out of line

    migrate([("knowledge", "0017_chunk_search_vector_inline")])

    assert _storage_of(chunk.pk)[1:] == (False, False)
    migrate_to_latest()  # what the search reads today
    assert Chunk.objects.get(pk=chunk.pk).text == LONG_PARAGRAPH
    hits = chunks_search_lexical(question="Is laundry reimbursed?", limit=5, reader=OPERATOR)
    assert [chunk_id for chunk_id, _ in hits] == [chunk.pk]
