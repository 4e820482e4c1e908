"""Ingestion services on real files, real PostgreSQL and the real embedding model."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest
from django.core.files.base import ContentFile
from django.db import DatabaseError

from knowledge import embedding
from knowledge.access import OPERATOR
from knowledge.chunking import embedding_input
from knowledge.models import Chunk, Document, Embedding, SentenceVector
from knowledge.search_scope import searchable_chunks
from knowledge.services import (
    document_ingest,
    document_process,
    documents_ingest,
    documents_reindex,
    embeddings_rebuild_stale,
    paths_expand,
    title_from_name,
)
from tests.support import documents

pytestmark = pytest.mark.django_db

MEDIA_TYPES = {
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "md": "text/markdown",
    "html": "text/html",
    "txt": "text/plain",
}


def vectors_by_input(document: Document) -> dict[str, np.ndarray]:
    """The document's vectors by what the model read (heading path + chunk text)."""
    rows = Embedding.objects.filter(chunk__document=document).values_list(
        "chunk__text", "chunk__section", "vector"
    )
    return {
        embedding_input(text=text, section=section): np.asarray(vector)
        for text, section, vector in rows
    }


@pytest.mark.parametrize("kind", ["pdf", "docx", "md", "html", "txt"])
def test_ingesting_a_new_file_stores_its_chunks_and_embeddings(documents_dir, kind):
    path = next(p for p in documents_dir.iterdir() if p.suffix == f".{kind}")

    outcome = document_ingest(path=path)

    assert outcome.action == "new"
    assert outcome.error == ""
    document = Document.objects.get()
    assert outcome.document == document
    assert document.source == str(path.resolve())
    assert document.status == Document.Status.READY
    assert document.media_type == MEDIA_TYPES[kind]
    assert document.content_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    assert document.enabled
    chunks = list(document.chunks.order_by("index"))
    assert len(chunks) == outcome.chunks > 0
    assert [chunk.index for chunk in chunks] == list(range(len(chunks)))
    for chunk in chunks:
        assert chunk.text_hash == hashlib.sha256(chunk.text.encode()).hexdigest()
        model_input = embedding_input(text=chunk.text, section=chunk.section)
        assert chunk.token_count == embedding.token_count(model_input) <= embedding.MAX_TOKENS
        vectors = list(chunk.embeddings.all())
        assert [e.model for e in vectors] == [embedding.model_version()]
        assert np.allclose(vectors[0].vector, embedding.embed_texts([model_input])[0], atol=1e-5)


def test_page_and_section_metadata_reach_the_chunks(documents_dir):
    pdf = document_ingest(path=documents_dir / "travel-policy.pdf").document
    md = document_ingest(path=documents_dir / "handbook.md").document

    assert list(pdf.chunks.order_by("index").values_list("page", flat=True)) == [1, 2, 3]
    assert pdf.chunks.get(text__contains="45 pence").page == 3
    leave = md.chunks.get(text__contains="25 days of annual leave")
    assert leave.section == "Handbook > Leave > Annual leave"
    assert leave.page is None


def test_titles_come_from_the_document_else_from_the_file_name(documents_dir):
    pdf = document_ingest(path=documents_dir / "travel-policy.pdf").document
    txt = document_ingest(path=documents_dir / "cafe-rules.txt").document
    named = document_ingest(path=documents_dir / "handbook.md", title="Staff Handbook").document

    assert pdf.title == documents.PDF_TITLE
    assert txt.title == "Cafe rules"
    assert named.title == "Staff Handbook"
    assert title_from_name("staff-handbook_2026.md") == "Staff handbook 2026"
    assert title_from_name("IT-Policy.pdf") == "IT Policy"


def test_reingesting_an_unchanged_file_changes_nothing(documents_dir, embedded_texts):
    path = documents_dir / "handbook.md"
    first = document_ingest(path=path)
    chunk_ids = set(Chunk.objects.values_list("pk", flat=True))
    embedding_ids = set(Embedding.objects.values_list("pk", flat=True))
    updated_at = Document.objects.get().updated_at
    embedded_texts.clear()

    again = document_ingest(path=path)

    assert again.action == "unchanged"
    assert again.chunks == first.chunks
    assert again.document.pk == first.document.pk
    assert set(Chunk.objects.values_list("pk", flat=True)) == chunk_ids
    assert set(Embedding.objects.values_list("pk", flat=True)) == embedding_ids
    assert Document.objects.get().updated_at == updated_at
    assert embedded_texts == []


def test_a_changed_file_replaces_its_chunks_and_reuses_unchanged_embeddings(
    documents_dir, embedded_texts
):
    path = documents_dir / "handbook.md"
    first = document_ingest(path=path)
    old_rows = dict(first.document.chunks.values_list("pk", "text"))
    old_vectors = vectors_by_input(first.document)
    new_paragraph = "Employees may buy up to five extra days of leave through salary sacrifice."
    path.write_text(
        documents.MARKDOWN.replace(
            "Everything about time off work.", f"Everything about time off work.\n\n{new_paragraph}"
        ).replace("## Expenses", "## Expenses\n\nExpenses are paid monthly by bank transfer."),
        encoding="utf-8",
    )
    embedded_texts.clear()

    second = document_ingest(path=path)

    assert second.action == "updated"
    document = Document.objects.get()
    assert document.pk == first.document.pk
    assert document.content_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    new_chunks = list(document.chunks.all())
    # Chunks whose text did not change are the same rows, the others are gone
    # (docs/decisions/0091-unchanged-chunks-keep-their-rows.md).
    unchanged = {pk for pk, text in old_rows.items() if text in {c.text for c in new_chunks}}
    assert unchanged and unchanged != set(old_rows)
    assert set(old_rows) & {chunk.pk for chunk in new_chunks} == unchanged
    assert all(Chunk.objects.get(pk=pk).text == old_rows[pk] for pk in unchanged)
    assert Chunk.objects.count() == len(new_chunks) == second.chunks
    assert Embedding.objects.count() == len(new_chunks)
    assert any(new_paragraph in chunk.text for chunk in new_chunks)
    assert any(new_paragraph in text for text in embedded_texts)
    new_vectors = vectors_by_input(document)
    reused = set(new_vectors) & set(old_vectors)
    assert reused  # sections that did not change produced the same chunk texts
    chunk_inputs = [text for text in embedded_texts if text in new_vectors]
    assert sorted(chunk_inputs) == sorted(set(new_vectors) - reused)
    # The rest are the sentences answers may quote that were not stored yet: the new ones.
    sentences = set(embedded_texts) - set(chunk_inputs)
    assert new_paragraph in sentences
    assert "Expenses are paid monthly by bank transfer." in sentences
    assert len(sentences) == 2
    for text in reused:
        assert np.array_equal(new_vectors[text], old_vectors[text])


def test_embeddings_are_reused_across_documents(documents_dir, embedded_texts):
    document_ingest(path=documents_dir / "handbook.md")
    copy = documents_dir / "handbook-copy.md"
    shutil.copy(documents_dir / "handbook.md", copy)
    embedded_texts.clear()

    outcome = document_ingest(path=copy)

    assert outcome.action == "new"
    assert outcome.chunks > 0
    assert embedded_texts == []
    assert Embedding.objects.count() == 2 * outcome.chunks


def test_the_same_text_under_another_heading_gets_its_own_embedding(tmp_path, embedded_texts):
    shared = "Requests are approved by your line manager within five working days."
    first = tmp_path / "leave.md"
    first.write_text(f"# Leave\n\n{shared}\n", encoding="utf-8")
    second = tmp_path / "expenses.md"
    second.write_text(f"# Expenses\n\n{shared}\n", encoding="utf-8")

    document_ingest(path=first)
    document_ingest(path=second)

    # The sentence itself is embedded once (answers quote it), whichever heading it is under.
    assert embedded_texts == [f"Leave\n\n{shared}", shared, f"Expenses\n\n{shared}"]
    vectors = Embedding.objects.order_by("chunk__document_id").values_list("vector", flat=True)
    assert not np.allclose(vectors[0], vectors[1])


def test_a_failure_while_saving_leaves_the_previous_version_complete(documents_dir, monkeypatch):
    path = documents_dir / "handbook.md"
    first = document_ingest(path=path)
    before = list(Chunk.objects.order_by("pk").values_list("pk", "text"))
    path.write_text(documents.MARKDOWN + "\nA new closing paragraph.\n", encoding="utf-8")

    def disk_full(*args, **kwargs):
        raise DatabaseError("could not extend file: No space left on device")

    monkeypatch.setattr(Embedding.objects, "bulk_create", disk_full)  # after chunks are written
    outcome = document_ingest(path=path)

    assert outcome.action == "failed"
    assert "No space left on device" in outcome.error
    document = Document.objects.get()
    assert document.status == Document.Status.READY
    assert document.content_hash == first.document.content_hash
    assert list(Chunk.objects.order_by("pk").values_list("pk", "text")) == before
    assert Embedding.objects.count() == len(before)


def test_corrupt_and_empty_files_fail_while_the_others_succeed(documents_dir):
    (documents_dir / "broken.pdf").write_bytes(documents.pdf_bytes()[:300])
    (documents_dir / "empty.txt").write_bytes(b"")
    (documents_dir / "damaged.docx").write_bytes(b"PK\x03\x04 not really a zip")

    outcomes = documents_ingest(paths=[documents_dir], title=None, enabled=True, dry_run=False)

    by_name = {o.source.rsplit("/", 1)[-1]: o for o in outcomes}
    assert len(by_name) == 8
    for name in ("broken.pdf", "empty.txt", "damaged.docx"):
        outcome = by_name[name]
        assert outcome.action == "failed"
        assert outcome.error
        assert outcome.document.status == Document.Status.FAILED
        assert outcome.document.error == outcome.error
        assert not outcome.document.chunks.exists()
    assert "Could not read the PDF" in by_name["broken.pdf"].error
    assert "empty" in by_name["empty.txt"].error
    assert "Word document" in by_name["damaged.docx"].error
    ready = Document.objects.filter(status=Document.Status.READY)
    assert ready.count() == 5
    assert all(document.chunks.exists() for document in ready)


def test_a_broken_new_version_is_recorded_without_touching_the_chunks(documents_dir):
    path = documents_dir / "travel-policy.pdf"
    document_ingest(path=path)
    before = list(Chunk.objects.order_by("pk").values_list("pk", flat=True))
    path.write_bytes(b"%PDF-1.4 truncated")

    outcome = document_ingest(path=path)

    assert outcome.action == "failed"
    document = Document.objects.get()
    # The last good version stays ready and searchable; the failure is shown beside it.
    assert document.status == Document.Status.READY
    assert "Could not read the PDF" in document.error
    assert list(Chunk.objects.order_by("pk").values_list("pk", flat=True)) == before
    assert set(searchable_chunks(reader=OPERATOR).values_list("pk", flat=True)) == set(before)

    path.write_bytes(documents.pdf_bytes())  # the good file again: fully ready once more
    assert document_ingest(path=path).action == "updated"
    document.refresh_from_db()
    assert (document.status, document.error) == (Document.Status.READY, "")


def test_dry_run_writes_nothing(documents_dir, embedded_texts):
    outcomes = documents_ingest(paths=[documents_dir], title=None, enabled=True, dry_run=True)

    assert {o.action for o in outcomes} == {"new"}
    assert all(o.chunks > 0 for o in outcomes)
    assert not Document.objects.exists()
    assert not Chunk.objects.exists()
    assert embedded_texts == []


def test_unsupported_files_are_skipped_in_directories_and_refused_when_named(documents_dir):
    (documents_dir / "budget.xls").write_bytes(b"not supported")
    (documents_dir / ".hidden.md").write_text("# Hidden\n\nNot ingested.")

    files, skipped = paths_expand([documents_dir])
    outcomes = documents_ingest(
        paths=[documents_dir / "budget.xls"], title=None, enabled=True, dry_run=False
    )

    assert sorted(f.name for f in files) == sorted(
        ["cafe-rules.txt", "expense-policy.docx", "handbook.md", "it-security.html"]
        + ["travel-policy.pdf"]
    )
    assert [s.name for s in skipped] == ["budget.xls"]
    assert [o.action for o in outcomes] == ["failed"]
    assert "Unsupported file type '.xls'" in outcomes[0].error
    assert ".pdf, .md/.markdown, .html/.htm, .txt, .docx" in outcomes[0].error
    assert not Document.objects.exists()


def test_disabled_flag_is_stored_and_kept(documents_dir):
    path = documents_dir / "handbook.md"
    document = document_ingest(path=path, enabled=False).document
    assert not document.enabled

    path.write_text(documents.MARKDOWN + "\nOne more line.\n", encoding="utf-8")
    document_ingest(path=path)  # enabled=True by default does not re-enable

    document.refresh_from_db()
    assert not document.enabled
    assert document.status == Document.Status.READY


def test_document_process_indexes_an_uploaded_file(settings, tmp_path, staff_user):
    settings.MEDIA_ROOT = tmp_path
    document = Document(title="Uploaded handbook", source="handbook.md", uploaded_by=staff_user)
    document.file.save("handbook.md", ContentFile(documents.MARKDOWN.encode()), save=False)
    document.media_type = "text/markdown"
    document.save()

    outcome = document_process(document=document)

    assert outcome.action == "new"
    document.refresh_from_db()
    assert document.status == Document.Status.READY
    assert document.title == "Uploaded handbook"
    assert document.chunks.count() == outcome.chunks > 0
    assert document.chunks.filter(section="Handbook > Leave > Annual leave").exists()

    again = document_process(document=document)  # the admin's "re-process" action
    assert again.action == "updated"
    assert document.chunks.count() == again.chunks


def test_document_process_marks_an_unreadable_upload_failed(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path
    document = Document(title="Scan", source="scan.pdf")
    document.file.save("scan.pdf", ContentFile(b"%PDF-1.7 garbage"), save=False)
    document.save()

    outcome = document_process(document=document)

    assert outcome.action == "failed"
    document.refresh_from_db()
    assert document.status == Document.Status.FAILED
    assert "Could not read the PDF" in document.error
    assert not document.chunks.exists()


def test_document_process_reports_a_missing_original(tmp_path):
    document = Document.objects.create(title="Gone", source=str(tmp_path / "gone.md"))

    outcome = document_process(document=document)

    document.refresh_from_db()
    assert outcome.action == "failed"
    assert document.status == Document.Status.FAILED
    assert "no longer available" in document.error


def test_stale_embeddings_are_rebuilt_with_the_configured_model(documents_dir, embedded_texts):
    document = document_ingest(path=documents_dir / "handbook.md").document
    originals = vectors_by_input(document)
    Embedding.objects.update(model="all-MiniLM-L6-v2@old", vector=[0.5] * embedding.DIMENSIONS)
    missing = document.chunks.first()
    Embedding.objects.filter(chunk=missing).delete()
    embedded_texts.clear()

    rebuilt = embeddings_rebuild_stale()

    assert rebuilt == document.chunks.count()
    assert set(Embedding.objects.values_list("model", flat=True)) == {embedding.model_version()}
    assert Embedding.objects.count() == document.chunks.count()
    assert sorted(embedded_texts) == sorted(originals)
    for text, vector in vectors_by_input(document).items():
        assert np.allclose(vector, originals[text], atol=1e-5)
    assert embeddings_rebuild_stale() == 0


def test_reindex_rechunks_documents_from_their_files(documents_dir):
    document = document_ingest(path=documents_dir / "handbook.md").document
    count = document.chunks.count()
    document.chunks.exclude(index=0).delete()  # e.g. chunks from an older chunker

    outcomes = documents_reindex(documents=[document])

    assert [o.action for o in outcomes] == ["updated"]
    assert document.chunks.count() == count
    assert Embedding.objects.filter(chunk__document=document).count() == count


def test_reindex_of_a_document_whose_file_is_gone_leaves_it_searchable(documents_dir):
    path = documents_dir / "handbook.md"
    document = document_ingest(path=path).document
    chunk_ids = set(document.chunks.values_list("pk", flat=True))
    path.unlink()

    outcomes = documents_reindex(documents=[document])

    assert outcomes[0].action == "failed"
    assert "no longer available" in outcomes[0].error
    document.refresh_from_db()
    assert document.status == Document.Status.READY
    assert set(document.chunks.values_list("pk", flat=True)) == chunk_ids


def test_texts_of_several_documents_go_to_the_model_together(documents_dir, monkeypatch):
    calls: list[int] = []
    real = embedding.embed_texts

    def counting(texts, *args, **kwargs):
        calls.append(len(texts))
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(embedding, "embed_texts", counting)
    shutil.copy(documents_dir / "handbook.md", documents_dir / "handbook-again.md")

    # Sentence vectors are kept by text hash, not by document: other tests' documents (written
    # by subprocesses, then deleted) may have left some.
    stored_before = SentenceVector.objects.count()

    outcomes = documents_ingest(paths=[documents_dir], title=None, enabled=True, dry_run=False)

    assert [o.action for o in outcomes] == ["new"] * 6
    assert len(calls) == 1  # one call for all six documents
    distinct_chunks = len(set(Chunk.objects.values_list("text_hash", flat=True)))
    new_sentences = SentenceVector.objects.count() - stored_before
    assert calls[0] == distinct_chunks + new_sentences  # and their sentences
    assert Embedding.objects.count() == Chunk.objects.count()


def test_an_embedding_failure_fails_only_its_own_document(documents_dir, monkeypatch):
    real = embedding.embed_texts

    def crashing_on_one_document(texts, *args, **kwargs):
        if any("crème brûlée" in text for text in texts):
            raise RuntimeError("model crashed")
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(embedding, "embed_texts", crashing_on_one_document)

    outcomes = documents_ingest(paths=[documents_dir], title=None, enabled=True, dry_run=False)

    failed = [o for o in outcomes if o.action == "failed"]
    assert [o.source.rsplit("/", 1)[-1] for o in failed] == ["cafe-rules.txt"]
    assert failed[0].error == "Could not compute embeddings: model crashed"
    assert failed[0].document.status == Document.Status.FAILED
    assert not failed[0].document.chunks.exists()
    assert Document.objects.filter(status=Document.Status.READY).count() == 4


def _stored_sentences() -> set[str]:
    return set(SentenceVector.objects.values_list("text_hash", flat=True))


def test_sentence_vectors_no_chunk_holds_are_pruned_on_reprocessing_and_deletion(
    tmp_path, django_capture_on_commit_callbacks
):
    """A sentence vector goes when the last chunk holding its sentence goes (the document
    re-ingested without it, or deleted); one another document still holds stays."""
    from knowledge.sentences import text_hash

    shared = "Every office keeps a first aid kit in the kitchen cupboard."
    only_a = "The Lisbon office closes at six on Fridays during the summer months."
    later_a = "The Lisbon office now closes at five on Fridays all year round."
    only_b = "The London office has bicycle parking for forty bicycles."
    a, b = tmp_path / "a.md", tmp_path / "b.md"
    a.write_text(f"# Lisbon\n\n{shared} {only_a}\n", encoding="utf-8")
    b.write_text(f"# London\n\n{shared} {only_b}\n", encoding="utf-8")
    documents_ingest(paths=[a, b], title=None, enabled=True, dry_run=False)
    assert {text_hash(shared), text_hash(only_a), text_hash(only_b)} <= _stored_sentences()

    # Re-ingested with its sentence changed: the old sentence's vector goes, the new one is
    # stored, the shared one stays (b holds it too).
    a.write_text(f"# Lisbon\n\n{shared} {later_a}\n", encoding="utf-8")
    (outcome,) = documents_ingest(paths=[a], title=None, enabled=True, dry_run=False)
    assert outcome.action == "updated"
    stored = _stored_sentences()
    assert text_hash(only_a) not in stored
    assert {text_hash(shared), text_hash(later_a), text_hash(only_b)} <= stored

    # Deleted: what only it held goes once the deletion commits; the shared sentence stays.
    with django_capture_on_commit_callbacks(execute=True):
        outcome.document.delete()
    stored = _stored_sentences()
    assert text_hash(later_a) not in stored
    assert {text_hash(shared), text_hash(only_b)} <= stored

    with django_capture_on_commit_callbacks(execute=True):
        Document.objects.all().delete()
    assert not {text_hash(shared), text_hash(only_b)} & _stored_sentences()


def test_stored_sentence_vectors_read_back_exactly_as_written(tmp_path):
    """The answering path reads the sentence vectors in pgvector's binary form: the very
    float32 values the text form gives, and the model's vectors of the sentences."""
    from knowledge.selectors import sentence_vectors_stored
    from knowledge.sentences import text_hash

    sentences = [
        "The Lisbon office closes at six on Fridays during the summer months.",
        "Every office keeps a first aid kit in the kitchen cupboard.",
    ]
    path = tmp_path / "offices.md"
    path.write_text("# Offices\n\n" + " ".join(sentences) + "\n", encoding="utf-8")
    documents_ingest(paths=[path], title=None, enabled=True, dry_run=False)
    hashes = [text_hash(sentence) for sentence in sentences]

    read = sentence_vectors_stored(text_hashes=[*hashes, "0" * 64])  # an unknown hash: absent
    assert set(read) == set(hashes)
    as_text = dict(
        SentenceVector.objects.filter(text_hash__in=hashes).values_list("text_hash", "vector")
    )
    model = embedding.embed_texts(sentences)
    for i, key in enumerate(hashes):
        assert read[key].dtype == np.float32 and read[key].shape == (embedding.DIMENSIONS,)
        assert np.array_equal(read[key], np.asarray(as_text[key], dtype=np.float32))
        assert np.allclose(read[key], model[i], atol=1e-6)
