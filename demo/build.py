"""Build the binary documents of the demo knowledge base.

The Markdown, HTML and text documents in this folder are written by hand. The PDF (expenses
and travel policy, one topic per page, numbered pages), the DOCX (customer refund policy,
Word heading styles), the XLSX (IT equipment stock and consulting day rates, two sheets) and
the PPTX (the Q1 2026 all-hands deck) are generated from the text below so they can be
reviewed in a diff.
The generated files are committed too: running the app never needs this script.

    .venv/bin/python demo/build.py
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

DEMO_DIR = Path(__file__).resolve().parent
PDF_PATH = DEMO_DIR / "expenses-and-travel-policy.pdf"
DOCX_PATH = DEMO_DIR / "customer-refund-policy.docx"
XLSX_PATH = DEMO_DIR / "it-equipment-stock.xlsx"
PPTX_PATH = DEMO_DIR / "all-hands-q1-2026.pptx"
# Fixed dates keep rebuilt files identical when the text has not changed.
BUILT_AT = dt.datetime(2026, 1, 5, 9, 0, tzinfo=dt.UTC)

# --- Expenses and travel policy (PDF): one list of (heading, paragraphs) per page ----------
EXPENSES_TITLE = "Northwind Analytics Expenses and Travel Policy"
EXPENSES_PAGES: list[list[tuple[str, list[str]]]] = [
    [
        (
            "1. Purpose and scope",
            [
                "This policy explains which business expenses Northwind Analytics pays for, "
                "how to book travel, and how to claim money back. It applies to all "
                "employees and to contractors whose agreement says that expenses are "
                "reimbursed. Version 4.1, effective 1 January 2026, owned by the Finance team "
                "(finance@northwind-analytics.example).",
                "The principle is simple: spend company money as carefully as if it were "
                "your own. An expense must be necessary for your work, reasonable in cost, "
                "and supported by a receipt. Personal costs, such as a partner's travel, "
                "upgrades you choose for comfort, fines and parking penalties, are never "
                "reimbursed.",
            ],
        ),
        (
            "2. Approval before you spend",
            [
                "Your line manager must approve any trip that needs an overnight stay, any "
                "flight, and any single expense above GBP 250 before you commit to it. "
                "Travel abroad also needs approval from a director at least three weeks "
                "ahead. Approval is given in the expenses system by creating a pre-approval "
                "request; an email from your manager is not enough.",
                "Costs that are re-charged to a client must be marked as billable with the "
                "client project code, so that Finance can invoice them. Check the client "
                "contract first: some clients cap travel costs or do not accept them at all.",
            ],
        ),
        (
            "3. Who to ask",
            [
                "Questions about what can be claimed go to Finance. Questions about booking "
                "go to the travel desk at travel@northwind-analytics.example, which is "
                "staffed from 08:30 to 17:30 on working days.",
            ],
        ),
    ],
    [
        (
            "4. Booking travel",
            [
                "Book all flights, trains and hotels through the travel desk or the company "
                "travel portal, at least 14 days before the trip where you can. Bookings "
                "made through the portal are paid centrally and do not need an expense "
                "claim. Bookings made elsewhere are only reimbursed when the portal could "
                "not offer a comparable option at the same or a lower price.",
            ],
        ),
        (
            "4.1 Trains",
            [
                "Rail is the preferred way to travel within the United Kingdom. Standard "
                "class is the rule. First class is allowed only for journeys longer than "
                "three hours, or when it costs no more than standard class. Use a Railcard "
                "if you have one; the company pays for a Railcard if you travel by train "
                "more than six times a year.",
            ],
        ),
        (
            "4.2 Flights",
            [
                "Fly economy class for flights under six hours. Premium economy is allowed "
                "for flights of six hours or more, and business class only with a "
                "director's written approval. Domestic flights are not allowed when the "
                "train takes less than five hours. Checked baggage is reimbursed when the "
                "trip lasts more than two nights or you carry equipment.",
            ],
        ),
        (
            "4.3 Hotels",
            [
                "The hotel limit is GBP 150 per night in London and GBP 110 per night "
                "elsewhere in the UK, including breakfast and taxes. Abroad, the limit is "
                "the amount shown for the city in the travel portal. Choose a hotel close "
                "to where you are working. Staying with friends or family instead of in a "
                "hotel is welcome; you may then claim GBP 30 per night towards a gift or a "
                "meal for your hosts.",
            ],
        ),
        (
            "4.4 Local transport and taxis",
            [
                "Use public transport where it is practical. Taxis and ride-hailing are "
                "reimbursed late at night (after 21:00), when you carry heavy equipment, "
                "when public transport is not available, or when several colleagues share "
                "the ride and it costs less than the train. Airport parking is reimbursed "
                "up to the cost of a taxi for the same journey.",
            ],
        ),
    ],
    [
        (
            "5. Meals and subsistence",
            [
                "When you travel on business you may claim the actual cost of meals up to "
                "these daily limits, with receipts: breakfast GBP 12 (only when it is not "
                "included in the hotel rate), lunch GBP 15, and dinner GBP 35. The limits "
                "apply per day and cannot be saved up from one day to the next. Alcohol is "
                "not reimbursed except as part of client entertainment.",
                "Meals in your normal place of work, or within 10 miles of it, are not "
                "reimbursed. Team lunches paid from a team budget are arranged by the "
                "manager and do not go through personal expense claims.",
            ],
        ),
        (
            "6. Client entertainment",
            [
                "Entertaining clients needs your manager's approval beforehand. The limit is "
                "GBP 60 per person, including the Northwind attendees. Record the names of "
                "all guests and their organisation on the claim. Gifts to clients may not "
                "exceed GBP 50 in value and must be recorded in the gifts register.",
            ],
        ),
        (
            "7. Mileage and using your own car",
            [
                "If you use your own car for a business journey, claim mileage at 45p per "
                "mile for the first 10,000 business miles in the tax year and 25p per mile "
                "after that, plus 5p per mile for each colleague you carry. The rates cover "
                "fuel, wear and insurance, so fuel receipts are not needed, but record the "
                "start, destination and purpose of every journey. Your car insurance must "
                "cover business use. Mileage between home and your usual office is "
                "commuting and cannot be claimed.",
            ],
        ),
        (
            "8. Working from home costs",
            [
                "Employees who work from home receive a one-off home office allowance of "
                "GBP 300 for a desk or chair. Broadband, electricity and heating are not "
                "reimbursed. Equipment such as monitors and headsets is ordered through the "
                "IT helpdesk, not bought and claimed.",
            ],
        ),
    ],
    [
        (
            "9. Submitting an expense claim",
            [
                "Submit claims in the expenses system within 30 days of spending the money. "
                "Claims submitted more than 90 days after the expense are refused, except "
                "with a Finance director's approval. Photograph each receipt with the mobile "
                "app or upload a scan; the receipt must show the supplier, the date, the "
                "amount and the VAT. If a receipt is lost, complete a missing receipt "
                "declaration; this is allowed at most three times a year.",
                "Foreign currency expenses are converted at the rate on your card statement. "
                "Attach the statement line if you paid with a personal card.",
            ],
        ),
        (
            "10. Approval and payment",
            [
                "Your line manager approves claims within five working days. Finance checks "
                "approved claims against this policy and pays them with the next weekly "
                "payment run every Thursday, into the bank account used for your salary. A "
                "claim that breaks the policy is returned with a reason; the parts that are "
                "within policy are still paid.",
            ],
        ),
        (
            "11. Company credit cards",
            [
                "Employees who travel at least once a month may apply for a company credit "
                "card with a limit of GBP 3,000. Card transactions appear in the expenses "
                "system automatically; attach the receipts and explain each one by the "
                "fifth working day of the following month. Never use the company card for "
                "personal spending, even if you intend to pay it back, and never withdraw "
                "cash with it.",
            ],
        ),
        (
            "12. Breaches of this policy",
            [
                "Claiming money that was not spent on business, or submitting the same "
                "receipt twice, is treated as gross misconduct. Honest mistakes are simply "
                "corrected: tell Finance as soon as you notice one.",
            ],
        ),
    ],
]

# --- Customer refund policy (DOCX): (heading level, heading, paragraphs) --------------------
REFUND_TITLE = "Customer Refund Policy"
REFUND_SECTIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "Overview",
        [
            "This policy tells Northwind Analytics staff how to handle refund requests from "
            "customers of our analytics platform, Northwind Insights, and of our consulting "
            "services. It is written for the Customer Success and Finance teams, and for "
            "anyone who receives a refund request from a customer. Version 2.3, effective "
            "1 March 2026.",
            "Our aim is to be fair and quick. A customer who asks for a refund should "
            "receive a clear answer within two working days, and an approved refund should "
            "reach them within ten working days.",
        ],
    ),
    (
        1,
        "Eligibility",
        [
            "Refunds are available for the following reasons: the customer was charged "
            "twice or charged the wrong amount; the service was unavailable for longer than "
            "our service level agreement allows; the customer cancelled within the "
            "cooling-off period; or a consulting deliverable was not delivered as agreed in "
            "the statement of work.",
            "Refunds are not available for a change of mind after the cooling-off period, "
            "for unused seats or users added by the customer during a billing period, or "
            "for usage-based charges (such as data processing credits) that have already "
            "been consumed.",
        ],
    ),
    (
        2,
        "Cooling-off period",
        [
            "New customers may cancel a Northwind Insights subscription within 30 days of "
            "the first payment and receive a full refund, no questions asked. The 30-day "
            "period runs from the date of the first invoice, not from the date the customer "
            "first signs in. The cooling-off period applies only once per customer.",
        ],
    ),
    (
        2,
        "Service outages",
        [
            "Our service level agreement promises 99.9% availability each month. When "
            "availability falls below that, the customer is entitled to a service credit "
            "of 10% of the monthly fee for each full 0.1% below the target, up to 50% of "
            "the monthly fee. Service credits are applied to the next invoice; they are paid "
            "out as a refund only when the customer is leaving.",
        ],
    ),
    (
        1,
        "Subscription refunds",
        [
            "Monthly subscriptions can be cancelled at any time and end at the close of the "
            "current billing month. The current month is not refunded.",
            "Annual subscriptions cancelled after the cooling-off period are refunded pro "
            "rata for the whole months remaining, minus an early termination fee of 15% of "
            "the refunded amount. For example, a customer paying GBP 12,000 a year who "
            "cancels with six whole months left receives GBP 6,000 minus GBP 900, that is "
            "GBP 5,100.",
            "Downgrades to a cheaper plan take effect at the next renewal date and are not "
            "refunded for the current term.",
        ],
    ),
    (
        1,
        "Consulting services",
        [
            "Consulting work is billed against a statement of work. If a deliverable does "
            "not meet the acceptance criteria in the statement of work, we first offer to "
            "correct it at no charge within 15 working days. If the customer declines, or "
            "the correction still does not meet the criteria, the fees for that deliverable "
            "are refunded in full. Time already spent on workshops and meetings that took "
            "place is not refunded.",
        ],
    ),
    (
        1,
        "How to process a refund",
        [
            "Log every refund request in the CRM as a Refund case, even if you expect to "
            "decline it, and link the customer's invoice.",
        ],
    ),
    (
        2,
        "Approval limits",
        [
            "A Customer Success manager may approve refunds up to GBP 1,000. Refunds from "
            "GBP 1,000 to GBP 10,000 need approval from the Head of Customer Success. Refunds "
            "above GBP 10,000 also need the Finance Director's approval.",
        ],
    ),
    (
        2,
        "Payment of the refund",
        [
            "Refunds are always paid back to the original payment method: to the same card "
            "for card payments, or by bank transfer to the account that paid the invoice. We "
            "never refund to a different account, even if the customer asks, because this is "
            "a common fraud pattern. Finance issues a credit note for every refund and "
            "processes approved refunds within ten working days. Card refunds can take a "
            "further five working days to appear on the customer's statement.",
        ],
    ),
    (
        2,
        "Communicating the decision",
        [
            "Tell the customer the decision in writing, using the templates in the Customer "
            "Success playbook. When declining, explain which part of this policy applies and "
            "offer an alternative where one exists, such as a service credit or a downgrade "
            "at renewal.",
        ],
    ),
    (
        1,
        "Chargebacks and disputes",
        [
            "If a customer disputes a card payment with their bank (a chargeback) instead of "
            "asking us, Finance responds to the bank with the invoice and the usage records. "
            "Do not issue a refund while a chargeback is open, or the customer may be repaid "
            "twice.",
            "Customers who disagree with a refund decision may escalate it to the Head of "
            "Customer Success at success@northwind-analytics.example, who answers within five "
            "working days. That answer is final.",
        ],
    ),
]


def build_pdf(path: Path = PDF_PATH) -> None:
    """The expenses and travel policy: one topic per page, 'Page n of N' in the footer."""
    from fpdf import FPDF

    class PolicyPDF(FPDF):
        def header(self) -> None:
            self.set_font("Helvetica", "I", 8)
            self.cell(0, 6, "Northwind Analytics - Expenses and Travel Policy - Version 4.1")
            self.ln(10)

        def footer(self) -> None:
            self.set_y(-15)
            self.set_font("Helvetica", "I", 8)
            self.cell(0, 10, f"Page {self.page_no()} of {{nb}}", align="C")

    pdf = PolicyPDF(format="A4")
    pdf.set_title(EXPENSES_TITLE)
    pdf.set_author("Northwind Analytics Finance")
    pdf.set_creation_date(BUILT_AT)
    pdf.set_auto_page_break(auto=True, margin=20)
    pdf.set_margins(20, 15, 20)
    for number, sections in enumerate(EXPENSES_PAGES, start=1):
        pdf.add_page()
        if number == 1:
            pdf.set_font("Helvetica", "B", 18)
            pdf.multi_cell(0, 9, EXPENSES_TITLE)
            pdf.ln(4)
        for heading, paragraphs in sections:
            pdf.set_font("Helvetica", "B", 13)
            pdf.multi_cell(0, 7, heading)
            pdf.ln(1)
            pdf.set_font("Helvetica", "", 10.5)
            for paragraph in paragraphs:
                pdf.multi_cell(0, 5.5, paragraph)
                pdf.ln(2.5)
            pdf.ln(2)
        if pdf.page_no() != number:
            raise RuntimeError(f"page {number} of the expenses policy overflowed")
    pdf.output(str(path))


def build_docx(path: Path = DOCX_PATH) -> None:
    """The customer refund policy with Word's Title and Heading 1/2 styles."""
    import docx

    document = docx.Document()
    properties = document.core_properties
    properties.title = REFUND_TITLE
    properties.author = "Northwind Analytics Customer Success"
    properties.created = BUILT_AT.replace(tzinfo=None)
    properties.modified = BUILT_AT.replace(tzinfo=None)
    properties.revision = 1
    document.add_heading(f"Northwind Analytics {REFUND_TITLE}", level=0)
    for level, heading, paragraphs in REFUND_SECTIONS:
        document.add_heading(heading, level=level)
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
    document.save(str(path))
    _normalise_zip_dates(path)


# --- IT equipment stock and day rates (XLSX) ------------------------------------------------
STOCK_HEADER = ["Item code", "Item", "In stock", "Reorder level", "Unit cost", "Last delivery"]
STOCK_ROWS: list[list[object]] = [
    ["NW-LAP-14", "Laptop, 14-inch (standard issue)", 12, 5, 1249.0, dt.date(2026, 1, 12)],
    ["NW-LAP-16", "Laptop, 16-inch (data science)", 4, 3, 2180.0, dt.date(2025, 11, 28)],
    ["NW-DCK-01", "USB-C docking station", 18, 10, 189.0, dt.date(2026, 1, 12)],
    ["NW-MON-27", "27-inch monitor", 9, 8, 245.0, dt.date(2025, 12, 3)],
    ["NW-HST-02", "Wireless headset", 25, 15, 79.0, dt.date(2025, 12, 3)],
    ["NW-KBD-01", "Keyboard and mouse set", 31, 10, 45.0, dt.date(2025, 10, 20)],
    ["NW-CAM-01", "Webcam, 1080p", 7, 6, 59.0, dt.date(2025, 10, 20)],
    ["NW-KEY-05", "Hardware security key", 40, 20, 52.0, dt.date(2026, 1, 5)],
]
RATES_HEADER = ["Service code", "Service", "Day rate", "Minimum days"]
RATES_ROWS: list[list[object]] = [
    ["CS-STRAT", "Data strategy workshop", 1450, 1],
    ["CS-BI", "Dashboard and BI build", 1150, 5],
    ["CS-ML", "Machine learning model development", 1350, 10],
    ["CS-TRN", "Analytics training (up to 12 attendees)", 1600, 1],
]


def build_xlsx(path: Path = XLSX_PATH) -> None:
    """Two sheets with a caption row, a header and formatted numbers and dates."""
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.properties.creator = "Northwind Analytics IT Support"
    workbook.properties.created = BUILT_AT.replace(tzinfo=None)
    workbook.properties.modified = BUILT_AT.replace(tzinfo=None)
    stock = workbook.active
    stock.title = "Equipment stock"
    stock["A1"] = "IT equipment in stock at the Bristol office (counted 12 January 2026)"
    stock.merge_cells("A1:F1")
    stock.append(STOCK_HEADER)
    for row in STOCK_ROWS:
        stock.append(row)
    for number in range(3, 3 + len(STOCK_ROWS)):
        stock.cell(number, 5).number_format = '"GBP "#,##0.00'
        stock.cell(number, 6).number_format = "dd/mm/yyyy"
    rates = workbook.create_sheet("Consulting day rates")
    rates.append(RATES_HEADER)
    for row in RATES_ROWS:
        rates.append(row)
    for number in range(2, 2 + len(RATES_ROWS)):
        rates.cell(number, 3).number_format = '"GBP "#,##0'
    workbook.save(str(path))
    _normalise_zip_dates(path, modified=True)


# --- All-hands deck (PPTX) -------------------------------------------------------------------
DECK_TITLE = "Northwind Analytics all-hands, Q1 2026"
DECK_SLIDES: list[tuple[str, list[str], str]] = [
    (
        "Where we are",
        [
            "Revenue for 2025 was GBP 8.4 million, up 12% on 2024.",
            "We are 64 people, including nine new starters since October.",
            "Client satisfaction averaged 8.7 out of 10 across 41 projects.",
        ],
        "Thank the delivery teams for the December releases.",
    ),
    (
        "Priorities for 2026",
        [
            "Launch the self-service dashboard product by the end of June.",
            "Grow the machine learning practice to twelve consultants.",
            "Achieve Cyber Essentials Plus certification by September.",
        ],
        "",
    ),
    (
        "Office and ways of working",
        [
            "The Bristol office opens a second meeting floor on 2 March 2026.",
            "Teams keep agreeing their shared office day each quarter.",
            "The next all-hands is on 16 April 2026, in Bristol and online.",
        ],
        "Remind everyone to book desks through the office app.",
    ),
]


def build_pptx(path: Path = PPTX_PATH) -> None:
    """A title slide, then one slide per topic: a title, bullets and speaker notes."""
    from pptx import Presentation

    deck = Presentation()
    deck.core_properties.title = DECK_TITLE
    deck.core_properties.author = "Northwind Analytics leadership team"
    deck.core_properties.created = BUILT_AT.replace(tzinfo=None)
    deck.core_properties.modified = BUILT_AT.replace(tzinfo=None)
    deck.core_properties.revision = 1
    opening = deck.slides.add_slide(deck.slide_layouts[0])
    opening.shapes.title.text = DECK_TITLE
    opening.placeholders[1].text = "Bristol and online, 15 January 2026"
    for title, bullets, notes in DECK_SLIDES:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        frame = slide.placeholders[1].text_frame
        frame.text = bullets[0]
        for bullet in bullets[1:]:
            frame.add_paragraph().text = bullet
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    deck.save(str(path))
    _normalise_zip_dates(path)


def _normalise_zip_dates(path: Path, *, modified: bool = False) -> None:
    """Office libraries stamp each zip member with the current time; pin them to BUILT_AT.
    `modified`: the document's own "modified" property too (openpyxl sets it on save)."""
    import re
    import zipfile

    with zipfile.ZipFile(path) as archive:
        members = [(info, archive.read(info.filename)) for info in archive.infolist()]
    if modified:
        stamp = BUILT_AT.strftime("%Y-%m-%dT%H:%M:%SZ").encode()
        members = [
            (
                info,
                re.sub(rb"(<dcterms:modified[^>]*>)[^<]*(<)", rb"\g<1>" + stamp + rb"\g<2>", data)
                if info.filename == "docProps/core.xml"
                else data,
            )
            for info, data in members
        ]
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for info, data in members:
            info.date_time = BUILT_AT.timetuple()[:6]
            archive.writestr(info, data)


def main() -> None:
    build_pdf()
    build_docx()
    build_xlsx()
    build_pptx()
    for path in (PDF_PATH, DOCX_PATH, XLSX_PATH, PPTX_PATH):
        print(f"wrote {path.relative_to(DEMO_DIR.parent)} ({path.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
