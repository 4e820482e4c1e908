"""Writes the OpenDocument files the tests read, with LibreOffice, from the Office files the
other tests use (tests/support): run once from the repository's root when they change,
and commit the results (the tests never need LibreOffice):

    .venv/bin/python tests/knowledge/files/opendocument/make.py

- inventory.ods: tests/support/spreadsheets.py's inventory.xlsx, saved by LibreOffice Calc
  (which pads every sheet with `number-rows-repeated`/`number-columns-repeated` empty cells
  up to its 1,048,576 rows and 16,384 columns);
- handbook.odt: tests/support/documents.py's Word document (headings and a table);
- leave-policy.odt: three pages, each under its own heading, with page breaks between them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3]))

from tests.support import documents  # noqa: E402
from tests.support.spreadsheets import inventory_xlsx  # noqa: E402

LEAVE_PAGES = [
    ("Annual leave", "Full-time staff take 27 days of annual leave, booked in the HR portal."),
    ("Parental leave", "Parents may take up to 18 weeks of unpaid parental leave per child."),
    ("Jury service", "Staff called for jury service keep their full salary for 10 working days."),
]


def leave_policy_docx(path: Path) -> Path:
    import docx
    from docx.enum.text import WD_BREAK

    document = docx.Document()
    document.core_properties.title = "Leave policy"
    for number, (heading, text) in enumerate(LEAVE_PAGES):
        if number:
            document.paragraphs[-1].add_run().add_break(WD_BREAK.PAGE)
        document.add_heading(heading, level=1)
        document.add_paragraph(text)
    document.save(path)
    return path


def convert(source: Path, extension: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(
            ["soffice", "--headless", "--convert-to", extension, "--outdir", folder, source],
            check=True,
            capture_output=True,
        )
        shutil.copy(
            Path(folder) / f"{source.stem}.{extension}", HERE / f"{source.stem}.{extension}"
        )


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        convert(inventory_xlsx(work / "inventory.xlsx"), "ods")
        (work / "handbook.docx").write_bytes(documents.docx_bytes())
        convert(work / "handbook.docx", "odt")
        convert(leave_policy_docx(work / "leave-policy.docx"), "odt")


if __name__ == "__main__":
    main()
