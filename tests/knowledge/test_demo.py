"""The demo knowledge base and `manage.py demo_setup`, as `make run` uses them."""

from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command

from knowledge.access import OPERATOR, Reader, documents_readable, reader_for
from knowledge.management.commands.demo_setup import (
    DEMO2_PASSWORD,
    DEMO2_USERNAME,
    DEMO_PASSWORD,
    DEMO_USERNAME,
    HR_COLLECTION,
    HR_GROUP,
)
from knowledge.models import Chunk, Collection, Document
from tests.support.knowledge_base import document_create

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

DEMO_DIR = Path(settings.BASE_DIR) / "demo"
DEMO_FILES = {
    "staff-handbook.md": "text/markdown",
    "expenses-and-travel-policy.pdf": "application/pdf",
    "it-security-policy.html": "text/html",
    "customer-refund-policy.docx": (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    ),
    "IT-Helpdesk-FAQ.txt": "text/plain",
    "it-equipment-stock.xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "all-hands-q1-2026.pptx": (
        "application/vnd.openxmlformats-officedocument.presentationml.presentation"
    ),
}


HR_FILE = "pay-bands-2026.md"  # in demo/hr-only/, the "HR only" collection
PAY_QUESTION = "What is the salary band for a Grade 7 analyst?"


def run(command: str, *args: str) -> str:
    out = StringIO()
    call_command(command, *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_demo_folder_holds_one_document_of_every_supported_type():
    names = {path.name for path in DEMO_DIR.iterdir() if path.name in DEMO_FILES}
    assert names == set(DEMO_FILES)
    for name in DEMO_FILES:
        text = (DEMO_DIR / name).read_bytes()
        assert b"<script" not in text.lower()


@pytest.fixture(scope="module")
def demo_setup_output(django_db_setup, django_db_blocker) -> str:
    """`demo_setup` run once for the module on an empty database (ingesting the demo takes a
    while); its rows are committed, so they are removed again afterwards."""
    with django_db_blocker.unblock():
        assert not Document.objects.exists()
        assert not get_user_model().objects.filter(username=DEMO_USERNAME).exists()
        output = run("demo_setup")
        yield output
        Document.objects.all().delete()
        get_user_model().objects.filter(username__in=[DEMO_USERNAME, DEMO2_USERNAME]).delete()
        Collection.objects.filter(name=HR_COLLECTION).delete()
        Group.objects.filter(name=HR_GROUP).delete()


def start_from_an_empty_database() -> None:
    """Inside the test's transaction: undo what the module fixture may have committed."""
    Document.objects.all().delete()
    get_user_model().objects.filter(username__in=[DEMO_USERNAME, DEMO2_USERNAME]).delete()


def test_demo_setup_creates_the_staff_user_and_ingests_every_demo_file(demo_setup_output):
    user = get_user_model().objects.get(username=DEMO_USERNAME)
    assert user.is_staff and user.is_superuser
    assert authenticate(username=DEMO_USERNAME, password=DEMO_PASSWORD) == user
    assert f"{DEMO_USERNAME} / {DEMO_PASSWORD}" in demo_setup_output

    documents = {Path(doc.source).name: doc for doc in Document.objects.all()}
    assert set(documents) == set(DEMO_FILES) | {HR_FILE}
    for name, media_type in DEMO_FILES.items():
        document = documents[name]
        assert document.status == Document.Status.READY, (name, document.error)
        assert document.enabled
        assert document.media_type.startswith(media_type), name
        assert document.chunks.count() >= 3, name
        # A workbook without a title of its own is called by its file name, as cited.
        assert document.title and (document.title != name or name.endswith(".xlsx"))
    assert "Northwind Analytics Staff Handbook" in demo_setup_output


def test_demo_pdf_chunks_carry_their_page_numbers(demo_setup_output):
    pdf = Document.objects.get(source__endswith="expenses-and-travel-policy.pdf")
    pages = set(pdf.chunks.values_list("page", flat=True))
    assert pages == {1, 2, 3, 4}
    hotel = Chunk.objects.filter(document=pdf, text__contains="GBP 150 per night").get()
    assert hotel.page == 2


def test_demo_spreadsheet_and_deck_chunks_carry_cells_and_slide_numbers(demo_setup_output):
    docks = Chunk.objects.get(
        document__source__endswith="it-equipment-stock.xlsx", text__contains="NW-DCK-01"
    )
    assert docks.sheet == "Equipment stock"
    assert docks.cells.startswith("A") and docks.cells.endswith(tuple("0123456789"))
    deck = Document.objects.get(source__endswith="all-hands-q1-2026.pptx")
    assert deck.title == "Northwind Analytics all-hands, Q1 2026"
    assert set(deck.chunks.values_list("page", flat=True)) == {1, 2, 3, 4}


def test_demo_setup_run_again_changes_nothing(demo_setup_output):
    user_ids = list(get_user_model().objects.values_list("pk", "password"))
    chunk_ids = sorted(Chunk.objects.values_list("pk", flat=True))

    output = run("demo_setup")

    assert "already exists" in output
    assert f"already has {len(DEMO_FILES) + 1} document(s)" in output
    assert list(get_user_model().objects.values_list("pk", "password")) == user_ids
    assert sorted(Chunk.objects.values_list("pk", flat=True)) == chunk_ids


def test_demo_setup_leaves_an_existing_user_and_knowledge_base_alone(django_user_model):
    start_from_an_empty_database()
    django_user_model.objects.create_user(username=DEMO_USERNAME, password="chosen-by-admin")
    own = document_create(title="Our own handbook", texts=["Leave is 30 days a year."])

    output = run("demo_setup")

    assert "already exists" in output and DEMO_PASSWORD not in output
    assert authenticate(username=DEMO_USERNAME, password="chosen-by-admin") is not None
    assert list(Document.objects.all()) == [own]


def test_demo_setup_with_a_missing_demo_folder_is_a_clear_error():
    start_from_an_empty_database()
    with pytest.raises(CommandError, match="Demo folder not found"):
        run("demo_setup", "--demo-dir", str(DEMO_DIR / "missing"))


def test_search_ranks_the_handbook_annual_leave_chunk_first(demo_setup_output):
    output = run("search", "how many days of annual leave")

    first = output.splitlines()[0]
    assert first.startswith(" 1. ")
    assert "Northwind Analytics Staff Handbook" in first
    assert "Annual leave" in first
    best = Chunk.objects.get(
        document__source__endswith="staff-handbook.md", text__contains="25 days of annual leave"
    )
    assert f"chunk {best.index})" in first
    assert "25 days of annual leave" in output.splitlines()[1]


def decide(question: str, reader: Reader = OPERATOR):
    """Retrieval and the evidence check for `question` as the pipeline runs them for `reader`:
    (the qualifying chunks, the refusal or None, the query vector)."""
    from chat.answering.evidence import evidence_threshold
    from chat.answering.evidence_signals import THRESHOLD_ON, evidence_assess, evidence_outcome
    from chat.answering.extractive import sentence_vectors_preload
    from knowledge.retrieval import chunks_search

    search = chunks_search(reader=reader, query=question, top_k=5)
    sentence_vectors_preload(search.chunks)
    threshold = evidence_threshold()
    decision = evidence_assess(
        reader=reader,
        question=question,
        question_vector=search.query_vector,
        chunks=search.chunks,
        threshold=threshold,
        threshold_on=THRESHOLD_ON,
    )
    chunks, refusal = evidence_outcome(search.chunks, decision, threshold)
    return chunks, refusal, search.query_vector


def ask(question: str) -> tuple[str, list[tuple[int, str]]]:
    """The extractive answer to `question` as the pipeline builds it (retrieval, the evidence
    check, the answer from the qualifying chunks): its text and its cited chunks' texts."""
    from chat.answering.extractive import extractive_answer

    chunks, refusal, vector = decide(question)
    assert refusal is None, question
    answer = extractive_answer(question=question, question_vector=vector, chunks=chunks)
    return answer.text, [(n, chunk.text) for n, chunk in answer.cited_chunks]


@pytest.mark.parametrize(
    ("question", "answer", "not_first"),
    [
        # The overview's audience sentence ("It is written for the Customer Success and Finance
        # teams, and for anyone who receives a refund request...") is close to any refund
        # question; the answer is the sentence holding the span of time asked for.
        ("What is the refund window for new customers?", "within 30 days", "written for"),
        # An FAQ's own question line ("Q: How do I connect to the VPN?") answers nothing.
        ("How can I tell the VPN is connected?", "green shield", "Q:"),
        ("How do I print a document in the office?", "Northwind-Print", "Q:"),
    ],
)
def test_demo_answer_opens_with_the_sentence_that_answers(
    demo_setup_output, question, answer, not_first
):
    text, citations = ask(question)

    first = text.split(" [1]")[0]
    assert answer in first and not_first not in first, text
    assert citations[0][0] == 1 and answer in citations[0][1]


def test_the_pay_bands_are_answered_for_the_demo_login_in_hr_and_refused_for_demo2(
    demo_setup_output,
):
    from chat.answering.evidence import NO_EVIDENCE_REFUSAL
    from chat.answering.extractive import extractive_answer

    demo = get_user_model().objects.get(username=DEMO_USERNAME)
    demo2 = get_user_model().objects.get(username=DEMO2_USERNAME)
    assert demo.groups.filter(name=HR_GROUP).exists()
    assert demo2.is_staff and not demo2.is_superuser and not demo2.groups.exists()
    assert authenticate(username=DEMO2_USERNAME, password=DEMO2_PASSWORD) == demo2
    assert f"{DEMO2_USERNAME} / {DEMO2_PASSWORD}" in demo_setup_output
    pay = Document.objects.get(source__endswith=HR_FILE)
    assert pay.collection.name == HR_COLLECTION
    assert list(pay.collection.reader_groups.values_list("name", flat=True)) == [HR_GROUP]
    assert pay not in documents_readable(user=demo2)

    chunks, refusal, vector = decide(PAY_QUESTION, reader_for(demo))
    assert refusal is None
    answer = extractive_answer(question=PAY_QUESTION, question_vector=vector, chunks=chunks)
    assert "£41,200 to £48,900" in answer.text

    chunks, refusal, _ = decide(PAY_QUESTION, reader_for(demo2))
    assert refusal == NO_EVIDENCE_REFUSAL and chunks == []
