"""Re-processing keeps the chunks whose text did not change (same rows), so the answers that
cited them still point at them and are not shown as stale; only the passages whose text changed
lose their chunk (their citations keep the snapshot and show as stale)."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from chat.models import Citation, Conversation
from chat.transcript import citation_fresh
from knowledge import embedding
from knowledge.models import Chunk, Document, Embedding
from knowledge.services import document_ingest, document_process
from tests.support.conversations import exchange_create

pytestmark = pytest.mark.django_db

SECTIONS = {
    "Annual leave": "Full-time employees receive 25 days of paid annual leave per calendar year.",
    "Expenses": "Travel expenses are reimbursed when a receipt is attached to the claim.",
    "Security": "Passwords must be at least 14 characters long and must never be reused.",
}


def handbook_text(sections: dict[str, str]) -> str:
    return "\n\n".join(f"# {heading}\n\n{body}\n" for heading, body in sections.items())


@pytest.fixture
def handbook(tmp_path) -> Document:
    path = tmp_path / "handbook.md"
    path.write_text(handbook_text(SECTIONS), encoding="utf-8")
    document = document_ingest(path=path).document
    assert document.chunks.count() == 3
    return document


@pytest.fixture
def cited(handbook, staff_user) -> dict[str, Citation]:
    """One past answer per section, each citing that section's chunk: section → citation."""
    conversation = Conversation.objects.create(owner=staff_user, title="Handbook")
    citations = {}
    for chunk in handbook.chunks.all():
        _, answer = exchange_create(
            conversation, question=f"About {chunk.section}?", answer="See [1].", cited=[chunk]
        )
        citations[chunk.section.split(" > ")[-1]] = answer.citations.get()
    assert set(citations) == set(SECTIONS)
    return citations


def state(citations: dict[str, Citation]) -> dict[str, tuple[int | None, bool]]:
    """section → (the chunk the citation points at, whether it is fresh)."""
    rows = {
        pk: (chunk_id, bool(fresh))
        for pk, chunk_id, fresh in Citation.objects.filter(
            pk__in=[c.pk for c in citations.values()]
        )
        .annotate(fresh=citation_fresh())
        .values_list("pk", "chunk_id", "fresh")
    }
    return {section: rows[c.pk] for section, c in citations.items()}


@pytest.mark.parametrize("how", ["reprocess", "reindex-all", "reindex-stale"])
def test_reprocessing_an_unchanged_document_keeps_every_citation_attached(handbook, cited, how):
    before = {section: (c.chunk_id, True) for section, c in cited.items()}
    embeddings = set(Embedding.objects.values_list("pk", "chunk_id"))

    if how == "reprocess":
        assert document_process(document=handbook).action == "updated"
    elif how == "reindex-all":
        call_command("reindex", "--all", stdout=StringIO())
    else:  # a document cut by an older chunker
        Document.objects.filter(pk=handbook.pk).update(chunker_version=1)
        call_command("reindex", "--stale", stdout=StringIO())
        handbook.refresh_from_db()
        assert handbook.chunker_version != 1

    assert state(cited) == before
    assert set(Embedding.objects.values_list("pk", "chunk_id")) == embeddings


def test_only_the_changed_passage_loses_its_chunk(handbook, cited):
    changed = {**SECTIONS, "Expenses": "Travel expenses are reimbursed within ten days."}
    moved = {"Intro": "This handbook applies to every employee.", **changed}
    Path(handbook.source).write_text(handbook_text(moved), encoding="utf-8")
    before = {section: c.chunk_id for section, c in cited.items()}

    document_process(document=handbook)

    after = state(cited)
    assert after["Annual leave"] == (before["Annual leave"], True)
    assert after["Security"] == (before["Security"], True)
    assert after["Expenses"] == (None, False)
    # The kept chunks took their new positions; the document reads in its new order.
    sections = list(handbook.chunks.order_by("index").values_list("section", flat=True))
    assert [s.split(" > ")[-1] for s in sections] == list(moved)
    assert Chunk.objects.get(pk=before["Security"]).index == 3
    assert Embedding.objects.filter(chunk__document=handbook).count() == 4


def test_a_kept_chunk_embedded_by_another_model_gets_the_current_one(handbook, cited):
    Embedding.objects.filter(chunk__document=handbook).update(model="an-older-model")
    before = {section: (c.chunk_id, True) for section, c in cited.items()}

    document_process(document=handbook)

    assert state(cited) == before
    assert (
        sorted(Embedding.objects.values_list("model", flat=True)) == [embedding.model_version()] * 3
    )
