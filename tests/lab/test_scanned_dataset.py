"""The scanned-documents evaluation set (lab/datasets/scanned, made by its build.py): both
datasets load, ask the same questions, and hold the same documents, as text PDFs in one and
as scans without a text layer (and one photo) in the other."""

from __future__ import annotations

import io
from pathlib import Path

from pypdf import PdfReader

from lab.evaluation.dataset import dataset_load

FOLDER = Path(__file__).resolve().parents[2] / "lab" / "datasets" / "scanned"


def test_the_text_and_scanned_datasets_ask_the_same_questions_of_the_same_documents():
    text = dataset_load(FOLDER / "text.json")
    scanned = dataset_load(FOLDER / "scanned.json")

    assert text.questions == scanned.questions
    assert [d.id for d in text.documents] == [d.id for d in scanned.documents]
    assert len([q for q in text.questions if q.kind == "answerable"]) == 12


def test_the_text_pdfs_have_a_text_layer_and_the_scans_none():
    scanned = dataset_load(FOLDER / "scanned.json")
    text = {d.id: d for d in dataset_load(FOLDER / "text.json").documents}
    suffixes = set()
    for document in scanned.documents:
        suffixes.add(document.path.suffix)
        if document.path.suffix != ".pdf":
            continue
        scan = PdfReader(io.BytesIO(document.path.read_bytes()))
        original = PdfReader(io.BytesIO(text[document.id].path.read_bytes()))
        assert len(scan.pages) == len(original.pages)
        assert all(not (page.extract_text() or "").strip() for page in scan.pages)
        assert all((page.extract_text() or "").strip() for page in original.pages)
    assert suffixes == {".pdf", ".jpg"}
