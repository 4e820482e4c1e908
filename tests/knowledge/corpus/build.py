"""Rebuild the files of this folder (see README.md): office files and PDFs written by
LibreOffice, workbooks written by XlsxWriter and laid out by hand the way small writers (Go,
JavaScript, .NET) lay them out, PDFs and CSV files in the forms other tools produce, and a few
damaged ones.

    .venv/bin/python tests/knowledge/corpus/build.py

It needs LibreOffice (`soffice`) and XlsxWriter; the tests read the committed files and need
neither. Every file is small (a few kB).
"""

from __future__ import annotations

import datetime as dt
import io
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

POLICY_HTML = """<html><head><meta charset="utf-8"><title>Travel policy</title></head><body>
<h1>Travel policy</h1>
<h2>Booking</h2>
<p>Book train travel at least fourteen days ahead through the travel desk in Lyon.</p>
<h2>Expenses</h2>
<p>Claim meals up to 35 euros per day; attach the receipts to the claim.</p>
<table><tr><td>Zone</td><td>Daily limit</td></tr><tr><td>Europe</td><td>35 EUR</td></tr>
<tr><td>Overseas</td><td>50 EUR</td></tr></table>
<h2>Refunds</h2>
<p>Refunds reach the employee’s account within ten working days of approval.</p>
</body></html>
"""

BUDGET_ROWS = [
    ["Cost centre", "Amount", "Approved on", "Owner"],
    ["Travel", "1250.50", "2026-03-15", "Ana Müller"],
    ["Office supplies", "310", "2026-03-16", "José Núñez"],
    ["Rent", "9000", "2026-04-01", "Zoë Ødegaard"],
]


def soffice(source: Path, target: str, out: Path) -> Path:
    """Convert `source` with LibreOffice into `out` (target: "docx", "pdf", ...); a .csv
    source is read as UTF-8 with commas."""
    infilter = ["--infilter=CSV:44,34,76"] if source.suffix == ".csv" else []
    subprocess.run(
        ["soffice", "--headless", *infilter, "--convert-to", target, "--outdir", str(out)]
        + [str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out / f"{source.stem}.{target.split(':')[0]}"


def libreoffice_files(work: Path) -> None:
    html = work / "travel-policy.html"
    html.write_text(POLICY_HTML, encoding="utf-8")
    docx = soffice(html, "docx:MS Word 2007 XML", work / "docx")
    shutil.copy(docx, HERE / "libreoffice-writer.docx")
    odt = soffice(html, "odt", work / "odt")
    shutil.copy(
        soffice(odt, "docx:Office Open XML Text", work / "ooxml"),
        HERE / "libreoffice-writer-ooxml.docx",
    )
    shutil.copy(soffice(odt, "pdf", work / "pdf"), HERE / "libreoffice-writer.pdf")

    csv_path = work / "budget.csv"
    csv_path.write_text("\n".join(",".join(row) for row in BUDGET_ROWS) + "\n", encoding="utf-8")
    shutil.copy(soffice(csv_path, "xlsx", work / "xlsx"), HERE / "libreoffice-calc.xlsx")
    shutil.copy(soffice(csv_path, "pdf", work / "calc-pdf"), HERE / "libreoffice-calc.pdf")
    merged = work / "xlsxwriter-for-calc.xlsx"
    xlsxwriter_workbook(merged)
    shutil.copy(
        soffice(merged, "xlsx:Calc Office Open XML", work / "calc-ooxml"),
        HERE / "libreoffice-calc-ooxml.xlsx",
    )
    # Windows-1252 with semicolons, as LibreOffice writes a CSV for a European locale.
    ods = soffice(csv_path, "ods", work / "ods")
    shutil.copy(
        soffice(ods, "csv:Text - txt - csv (StarCalc):59,34,1252", work / "csv"),
        HERE / "libreoffice-cp1252-semicolons.csv",
    )

    deck = work / "warehouse-review.pptx"
    python_pptx_deck(deck)
    shutil.copy(soffice(deck, "pptx", work / "pptx"), HERE / "libreoffice-impress.pptx")
    shutil.copy(soffice(deck, "pdf", work / "impress-pdf"), HERE / "libreoffice-impress.pdf")


def python_pptx_deck(path: Path) -> None:
    sys.path.insert(0, str(HERE.parents[2]))
    from tests.support.spreadsheets import deck_pptx

    deck_pptx(path)


def xlsxwriter_workbook(path: Path, **options) -> None:
    import xlsxwriter

    workbook = xlsxwriter.Workbook(str(path), options)
    sheet = workbook.add_worksheet("Stock")
    day = workbook.add_format({"num_format": "d mmm yyyy"})
    money = workbook.add_format({"num_format": "#,##0.00"})
    sheet.write_row(0, 0, ["Product code", "Product name", "Quantity", "Price", "Received"])
    for i in range(1, 6):
        sheet.write_row(i, 0, [f"QX-{2200 + i}", f"Brass valve size {i}", i * 10])
        sheet.write_number(i, 3, 1234.5 * i, money)
        sheet.write_datetime(i, 4, dt.datetime(2026, 3, i), day)
    sheet.merge_range("A8:E8", "Counted by the Lyon warehouse team", None)
    notes = workbook.add_worksheet("Notes")
    bold = workbook.add_format({"bold": True})
    notes.write_row(0, 0, ["Item", "Remark", "Result"])
    notes.write_rich_string(1, 0, "Valve ", bold, "QX-2207", " brass")
    notes.write(1, 1, "checked twice")
    notes.write_formula(1, 2, "=1/0", None, "#DIV/0!")
    notes.write(2, 0, "Pump housing")
    notes.write_boolean(2, 1, True)
    notes.write_formula(2, 2, '="ready"&" to ship"', None, "ready to ship")
    workbook.close()


def xlsxwriter_files() -> None:
    xlsxwriter_workbook(HERE / "xlsxwriter.xlsx")
    xlsxwriter_workbook(HERE / "xlsxwriter-inline-strings.xlsx", constant_memory=True)
    xlsxwriter_workbook(HERE / "xlsxwriter-1904-dates.xlsx", date_1904=True)


# --- Workbooks laid out by hand ------------------------------------------------------------

MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PACKAGE_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
TYPES = "application/vnd.openxmlformats-officedocument.spreadsheetml"
STYLES = (
    f'<styleSheet xmlns="{MAIN}"><numFmts count="1"><numFmt numFmtId="164" '
    'formatCode="yyyy-mm-dd"/></numFmts><fonts count="1"><font/></fonts><fills count="1">'
    '<fill><patternFill patternType="none"/></fill></fills><borders count="1"><border/>'
    '</borders><cellXfs count="2"><xf numFmtId="0"/><xf numFmtId="164" applyNumberFormat="1"/>'
    "</cellXfs></styleSheet>"
)


def workbook_by_hand(
    name: str,
    sheet_data: str,
    *,
    shared: list[str] | None = None,
    styles: str | None = None,
    absolute: bool = False,
    date1904: bool = False,
    sheet_path: str = "xl/worksheets/sheet1.xml",
    prefix: str = "",
) -> None:
    """One sheet, "Budget", with only the parts given: no styles, no shared strings, no
    document properties unless asked; `absolute` writes part paths as "/xl/..."; `prefix`
    puts the main namespace under a prefix ("x:", as .NET's Open XML SDK writes)."""
    p = f"{prefix}:" if prefix else ""
    xmlns = f'xmlns{":" + prefix if prefix else ""}="{MAIN}"'
    root = "/" if absolute else ""
    relationships = [
        f'<Relationship Id="rId1" Type="{RELS}/worksheet" '
        f'Target="{root + sheet_path if absolute else sheet_path[3:]}"/>'
    ]
    overrides = [("xl/workbook.xml", "sheet.main+xml"), (sheet_path, "worksheet+xml")]
    parts: dict[str, str] = {}
    if shared is not None:
        relationships.append(
            f'<Relationship Id="rId2" Type="{RELS}/sharedStrings" '
            f'Target="{"/xl/" if absolute else ""}sharedStrings.xml"/>'
        )
        overrides.append(("xl/sharedStrings.xml", "sharedStrings+xml"))
        parts["xl/sharedStrings.xml"] = (
            f'<{p}sst {xmlns} count="{len(shared)}" uniqueCount="{len(shared)}">'
            + "".join(item.replace("<", f"<{p}").replace(f"<{p}/", f"</{p}") for item in shared)
            + f"</{p}sst>"
        )
    if styles is not None:
        relationships.append(
            f'<Relationship Id="rId3" Type="{RELS}/styles" '
            f'Target="{"/xl/" if absolute else ""}styles.xml"/>'
        )
        overrides.append(("xl/styles.xml", "styles+xml"))
        parts["xl/styles.xml"] = styles
    parts["[Content_Types].xml"] = (
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.'
        'relationships+xml"/><Default Extension="xml" ContentType="application/xml"/>'
        + "".join(
            f'<Override PartName="/{part}" ContentType="{TYPES}.{kind}"/>'
            for part, kind in overrides
        )
        + "</Types>"
    )
    parts["_rels/.rels"] = (
        f'<Relationships xmlns="{PACKAGE_RELS}"><Relationship Id="rId1" '
        f'Type="{RELS}/officeDocument" Target="{root}xl/workbook.xml"/></Relationships>'
    )
    parts["xl/_rels/workbook.xml.rels"] = (
        f'<Relationships xmlns="{PACKAGE_RELS}">' + "".join(relationships) + "</Relationships>"
    )
    properties = f'<{p}workbookPr date1904="1"/>' if date1904 else ""
    parts["xl/workbook.xml"] = (
        f'<{p}workbook {xmlns} xmlns:r="{RELS}">{properties}<{p}sheets>'
        f'<{p}sheet name="Budget" sheetId="1" r:id="rId1"/></{p}sheets></{p}workbook>'
    )
    data = sheet_data.replace("<", f"<{p}").replace(f"<{p}/", f"</{p}") if p else sheet_data
    parts[sheet_path] = (
        f'<{p}worksheet {xmlns} xmlns:r="{RELS}"><{p}sheetData>{data}</{p}sheetData></{p}worksheet>'
    )
    with zipfile.ZipFile(HERE / f"{name}.xlsx", "w", zipfile.ZIP_DEFLATED) as archive:
        for part, text in parts.items():
            archive.writestr(part, '<?xml version="1.0" encoding="UTF-8"?>' + text)


INLINE = (
    '<row r="1"><c r="A1" t="inlineStr"><is><t>Cost centre</t></is></c>'
    '<c r="B1" t="inlineStr"><is><t>Amount</t></is></c></row>'
    '<row r="2"><c r="A2" t="inlineStr"><is><t>Travel</t></is></c><c r="B2"><v>1250.5</v></c></row>'
    '<row r="3"><c r="A3" t="inlineStr"><is><r><t>Office </t></r><r><t>supplies</t></r></is></c>'
    '<c r="B3"><v>310</v></c></row>'
)
SHARED = [
    "<si><t>Cost centre</t></si>",
    "<si><t>Amount</t></si>",
    "<si><r><rPr><b/></rPr><t>Tra</t></r><r><t>vel</t></r></si>",
    '<si><t xml:space="preserve"> Rent </t></si>',
]
SHARED_DATA = (
    '<row r="1"><c r="A1" t="s"><v>0</v></c><c r="B1" t="s"><v>1</v></c></row>'
    '<row r="2"><c r="A2" t="s"><v>2</v></c><c r="B2" s="3"><v>1250.5</v></c></row>'
    '<row r="3"><c r="A3" t="s"><v>3</v></c><c r="B3"><v>9000</v></c></row>'
)
CELL_TYPES = (
    '<row r="1"><c r="A1" t="str"><v>Kind</v></c><c r="B1" t="str"><v>Value</v></c></row>'
    '<row r="2"><c r="A2" t="str"><v>Error</v></c><c r="B2" t="e"><v>#N/A</v></c></row>'
    '<row r="3"><c r="A3" t="str"><v>Date</v></c>'
    '<c r="B3" t="d"><v>2026-03-15T00:00:00</v></c></row>'
    '<row r="4"><c r="A4" t="str"><v>Flag</v></c><c r="B4" t="b"><v>1</v></c></row>'
    '<row r="5"><c r="A5" t="str"><v>Formula</v></c><c r="B5" t="str"><f>CONCAT("a","b")</f>'
    "<v>ab</v></c></row>"
)
NO_REFERENCES = (
    '<row><c t="inlineStr"><is><t>Cost centre</t></is></c><c t="inlineStr"><is><t>Amount</t></is>'
    '</c></row><row><c t="inlineStr"><is><t>Travel</t></is></c><c><v>1250.5</v></c></row>'
)
DATES = (
    '<row r="1"><c r="A1" t="inlineStr"><is><t>Event</t></is></c>'
    '<c r="B1" t="inlineStr"><is><t>Day</t></is></c></row>'
    '<row r="2"><c r="A2" t="inlineStr"><is><t>Launch</t></is></c><c r="B2" s="1"><v>45000</v></c>'
    "</row>"
)


def hand_made_workbooks() -> None:
    workbook_by_hand("minimal-inline-strings", INLINE)
    workbook_by_hand("minimal-absolute-paths", INLINE, absolute=True)
    workbook_by_hand("minimal-prefixed-namespace", INLINE, prefix="x")
    workbook_by_hand("minimal-sheet-outside-worksheets", INLINE, sheet_path="xl/sheet1.xml")
    workbook_by_hand("minimal-no-cell-references", NO_REFERENCES)
    workbook_by_hand("shared-rich-text-no-styles", SHARED_DATA, shared=SHARED)
    workbook_by_hand("shared-absolute-paths", SHARED_DATA, shared=SHARED, absolute=True)
    workbook_by_hand("cell-types-str-e-d-b", CELL_TYPES)
    workbook_by_hand("dates-1904", DATES, styles=STYLES, date1904=True)
    workbook_by_hand("style-beyond-the-styles", DATES.replace('s="1"', 's="7"'), styles=STYLES)


# --- PDFs in other forms --------------------------------------------------------------------


def pdf_files() -> None:
    from pypdf import PdfReader, PdfWriter

    source = (HERE / "libreoffice-writer.pdf").read_bytes()

    def encrypted(name: str, user: str, owner: str, algorithm: str) -> None:
        writer = PdfWriter(clone_from=PdfReader(io.BytesIO(source)))
        writer.encrypt(user_password=user, owner_password=owner, algorithm=algorithm)
        with open(HERE / name, "wb") as out:
            writer.write(out)

    # Opens without a password (restrictions only): read like any PDF.
    encrypted("encrypted-owner-password-only.pdf", "", "owner-secret", "AES-128")
    encrypted("encrypted-rc4-owner-only.pdf", "", "owner-secret", "RC4-128")
    # Needs a password to open: fails with a readable message.
    encrypted("encrypted-user-password.pdf", "open-sesame", "owner-secret", "AES-256")
    # Cut off mid-file (an interrupted download) and with every xref offset wrong.
    (HERE / "damaged-truncated.pdf").write_bytes(source[: len(source) * 2 // 3])
    shifted = source.replace(b"%PDF-1.", b"%PDF-1.\n%% shifted by a proxy\n%PDF-1.", 1)
    (HERE / "damaged-shifted-offsets.pdf").write_bytes(shifted)
    # A page with no text layer: fails with the no-text message (OCR is another matter).
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 50, style="F")
    (HERE / "image-only.pdf").write_bytes(bytes(pdf.output()))


# --- Text and CSV in other encodings ---------------------------------------------------------


def csv_files() -> None:
    rows = BUDGET_ROWS + [["Catering", "480", "2026-04-03", "Søren Ærø"]]
    tab = "\r\n".join("\t".join(row) for row in rows) + "\r\n"
    # Excel's "Unicode text": UTF-16 LE with its BOM, tab separated.
    (HERE / "excel-unicode-text-utf16.csv").write_bytes(tab.encode("utf-16"))
    (HERE / "utf8-bom-commas.csv").write_bytes(
        ("\r\n".join(",".join(row) for row in rows) + "\r\n").encode("utf-8-sig")
    )
    # Classic Mac OS line ends, Latin-1, pipes, a quoted cell with a line break in it.
    lines = ["|".join(row) for row in rows] + ['Misc|12|2026-05-01|"two\rlines"']
    (HERE / "latin1-pipes-cr.csv").write_bytes(("\r".join(lines) + "\r").encode("latin-1"))
    # A Japanese supplier list in Shift_JIS.
    japanese = "品番,品名,数量\nQX-2207,真鍮バルブ,150\nQX-2208,ポンプ,12\n"
    (HERE / "shift-jis.csv").write_bytes(japanese.encode("shift_jis"))


# --- Damaged office files ------------------------------------------------------------------


def damaged_files() -> None:
    docx = (HERE / "libreoffice-writer.docx").read_bytes()
    (HERE / "damaged-truncated.docx").write_bytes(docx[: len(docx) // 2])
    xlsx = (HERE / "libreoffice-calc.xlsx").read_bytes()
    (HERE / "damaged-not-a-zip.xlsx").write_bytes(
        b"<html><body>Session expired</body></html>" + xlsx[:64]
    )
    pptx = (HERE / "libreoffice-impress.pptx").read_bytes()
    with (
        zipfile.ZipFile(io.BytesIO(pptx)) as source,
        zipfile.ZipFile(HERE / "damaged-missing-slide.pptx", "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for part in source.infolist():
            if part.filename != "ppt/slides/slide2.xml":
                target.writestr(part, source.read(part.filename))


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        libreoffice_files(Path(work))
    xlsxwriter_files()
    hand_made_workbooks()
    pdf_files()
    csv_files()
    damaged_files()


if __name__ == "__main__":
    main()
