"""Whether a document is a personal file, and whose, is said by knowledge/access.py alone
(`personal_files_filter`, `document_is_personal`, `documents_not_personal_sql`): no other
product module restates the ownership test in a query, a predicate or raw SQL."""

from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings

ROOT = Path(settings.BASE_DIR)
PRODUCT = ("accounts", "chat", "knowledge", "pages")
THE_RULE = Path("knowledge/access.py")
RESTATED = re.compile(
    r"owner__isnull"
    r"|\.owner_id is (?:not )?None"
    r"|owner_id IS (?:NOT )?NULL"
    r"|Document\.objects\.filter\((?:[^()]*,\s*)?owner="
)


def test_personal_file_ownership_is_decided_by_the_read_rule_only():
    found = {}
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if relative == THE_RULE or "migrations" in relative.parts:
                continue
            text = path.read_text(encoding="utf-8")
            lines = [
                number
                for number, line in enumerate(text.splitlines(), start=1)
                if RESTATED.search(line)
            ]
            if lines:
                found[str(relative)] = lines
    assert found == {}
