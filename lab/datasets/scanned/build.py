"""Builds the scanned-documents evaluation set: six short policy documents written here, each
as a text PDF (`text/`) and as a scan of the same pages (`scans/`), and two datasets asking
the same questions of each: `text.json` and `scanned.json` (format: lab/evaluation/dataset.py).

The scans are made the way a scanner or a phone makes them (lab/evaluation/scans.py): pages
rendered at 200 dpi in greyscale, turned 1-2.5 degrees, speckled, blurred and JPEG-compressed;
one document's second page fed sideways (turned 90 degrees), and the one-page document
photographed (a JPEG file instead of a PDF).

Run from the repository's root, then commit what it wrote (deterministic: seeded noise):

    .venv/bin/python lab/datasets/scanned/build.py
    .venv/bin/python manage.py evaluate lab/datasets/scanned/text.json
    .venv/bin/python manage.py evaluate lab/datasets/scanned/scanned.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from lab.evaluation.scans import (  # noqa: E402
    Degradation,
    image_bytes,
    pdf_page_images,
    scan,
    scanned_pdf,
)

# (id, title, pages: [(heading, [paragraphs])], questions: [(question, [gold answers])])
DOCUMENTS = [
    (
        "annual-leave",
        "Annual leave policy",
        [
            (
                "Entitlement",
                [
                    "Full-time employees receive 27 days of paid annual leave each year, in "
                    "addition to the eight public holidays.",
                    "Part-time employees receive a pro-rata share calculated from their "
                    "contracted hours.",
                ],
            ),
            (
                "Carrying leave over",
                [
                    "Up to 5 unused days may be carried over into the next leave year. Days "
                    "carried over must be taken before the end of March.",
                ],
            ),
        ],
        [
            ("How many days of paid annual leave do full-time employees get?", ["27 days"]),
            ("How many unused leave days can be carried over?", ["5 unused days", "Up to 5"]),
        ],
    ),
    (
        "travel-expenses",
        "Travel expenses",
        [
            (
                "Hotels",
                [
                    "Hotel stays are reimbursed up to 165 pounds per night in London and 110 "
                    "pounds per night elsewhere in the country.",
                ],
            ),
            (
                "Mileage",
                [
                    "Business journeys in a private car are paid at 45 pence per mile for the "
                    "first 10,000 miles in a tax year.",
                    "Keep a mileage log with the start and end postcode of every journey.",
                ],
            ),
        ],
        [
            ("What is the hotel limit per night in London?", ["165 pounds"]),
            ("What is the mileage rate for a private car?", ["45 pence per mile"]),
        ],
    ),
    (
        "it-security",
        "IT security standard",
        [
            (
                "Passwords",
                [
                    "Passwords must be at least 14 characters long and must never be reused "
                    "for another service.",
                    "Store every work password in the company password manager.",
                ],
            ),
            (
                "Lost devices",
                [
                    "Report a lost or stolen laptop to the service desk within one hour, on "
                    "extension 4357.",
                ],
            ),
        ],
        [
            ("How long must passwords be?", ["14 characters"]),
            ("Which extension do I call to report a stolen laptop?", ["4357"]),
        ],
    ),
    (
        "parental-leave",
        "Parental leave",
        [
            (
                "Maternity and adoption",
                [
                    "Employees with 26 weeks of service receive full pay for the first 16 "
                    "weeks of maternity or adoption leave.",
                ],
            ),
            (
                "Paternity",
                [
                    "Partners may take 4 weeks of paternity leave on full pay within eight "
                    "weeks of the birth or placement.",
                ],
            ),
        ],
        [
            ("For how many weeks is maternity leave on full pay?", ["16 weeks", "first 16"]),
            ("How much paternity leave on full pay can partners take?", ["4 weeks"]),
        ],
    ),
    (
        "facilities",
        "Building and facilities",
        [
            (
                "Opening hours and parking",
                [
                    "The head office at 12 Harbour Street is open from 7:30 to 19:00 on "
                    "weekdays. Weekend access needs a request to facilities.",
                    "The staff car park has 48 spaces, of which 6 are reserved for electric "
                    "vehicle charging.",
                ],
            ),
        ],
        [
            ("When does the head office open on weekdays?", ["7:30"]),
            ("How many car park spaces are there for electric vehicle charging?", ["6 are"]),
        ],
    ),
    (
        "purchasing",
        "Purchasing rules",
        [
            (
                "Quotes",
                [
                    "Purchases above 2,500 pounds need three written quotes from different "
                    "suppliers before an order is placed.",
                ],
            ),
            (
                "Approval",
                [
                    "Orders above 25,000 pounds are approved by the finance director and "
                    "recorded in the contracts register.",
                ],
            ),
        ],
        [
            ("How many quotes are needed for purchases above 2,500 pounds?", ["three"]),
            ("Who approves orders above 25,000 pounds?", ["finance director"]),
        ],
    ),
]
OFF_KB = [
    "What is the dress code for client meetings?",
    "How do I book a meeting room in the Glasgow office?",
    "When is the staff summer party?",
]
SIDEWAYS = "it-security"  # its second page is fed turned by 90 degrees
PHOTO = "facilities"  # one page, photographed: a JPEG file in the scanned set
SCAN = Degradation(skew=2.0, noise=0.003, blur=0.5, jpeg=50, seed=0)


def document_pdf(title: str, pages: list[tuple[str, list[str]]]) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title(title)
    for heading, paragraphs in pages:
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 14)
        pdf.cell(0, 10, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        for paragraph in paragraphs:
            pdf.multi_cell(0, 6, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(4)
    return bytes(pdf.output())


def main() -> None:
    for folder in ("text", "scans"):
        (HERE / folder).mkdir(exist_ok=True)
    text_documents, scanned_documents, questions = [], [], []
    for number, (doc_id, title, pages, asked) in enumerate(DOCUMENTS):
        pdf = document_pdf(title, pages)
        (HERE / "text" / f"{doc_id}.pdf").write_bytes(pdf)
        text_documents.append({"id": doc_id, "title": title, "file": f"text/{doc_id}.pdf"})
        degradation = Degradation(
            skew=(1.0 + 0.3 * number) * (-1) ** number,
            noise=SCAN.noise,
            blur=SCAN.blur,
            jpeg=SCAN.jpeg,
            seed=number,
        )
        if doc_id == PHOTO:
            photo = scan(pdf_page_images(pdf, dpi=200)[0], degradation)
            (HERE / "scans" / f"{doc_id}.jpg").write_bytes(
                image_bytes(photo, "JPEG", dpi=200, quality=50)
            )
            scanned_documents.append({"id": doc_id, "title": title, "file": f"scans/{doc_id}.jpg"})
        else:
            scanned = scanned_pdf(pdf, degradation=degradation, dpi=200)
            if doc_id == SIDEWAYS:
                sideways = Degradation(**{**degradation.__dict__, "rotate": 90})
                first = scanned_pdf(pdf, degradation=degradation, pages={1}, dpi=200)
                second = scanned_pdf(pdf, degradation=sideways, pages={2}, dpi=200)
                scanned = _pages_joined([(first, 1), (second, 2)])
            (HERE / "scans" / f"{doc_id}.pdf").write_bytes(scanned)
            scanned_documents.append({"id": doc_id, "title": title, "file": f"scans/{doc_id}.pdf"})
        for index, (question, answers) in enumerate(asked, start=1):
            questions.append(
                {
                    "id": f"{doc_id}-{index}",
                    "question": question,
                    "expect": "answer",
                    "kind": "answerable",
                    "document": doc_id,
                    "answers": answers,
                    "page": min(index, len(pages)),
                }
            )
    for index, question in enumerate(OFF_KB, start=1):
        questions.append(
            {
                "id": f"off-kb-{index}",
                "question": question,
                "expect": "refusal",
                "kind": "off_kb",
                "document": None,
            }
        )
    for name, docs in (("text", text_documents), ("scanned", scanned_documents)):
        dataset = {"name": f"policies-{name}", "documents": docs, "questions": questions}
        (HERE / f"{name}.json").write_text(json.dumps(dataset, indent=1) + "\n")


def _pages_joined(parts: list[tuple[bytes, int]]) -> bytes:
    """A PDF of page N of each (pdf, N)."""
    import io

    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for data, page in parts:
        writer.add_page(PdfReader(io.BytesIO(data)).pages[page - 1])
    output = io.BytesIO()
    writer.write(output)
    return output.getvalue()


if __name__ == "__main__":
    main()
