"""Who counts as staff is decided by one function, `knowledge.access.user_is_staff` (signed in,
active, staff), which every surface calls: no product module reads `is_staff` to decide for
itself, and the API's permission class is the project's, not DRF's `IsAdminUser` (which
looks at `is_staff` alone)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import AnonymousUser

from knowledge.access import user_is_staff

ROOT = Path(settings.BASE_DIR)
PRODUCT = ("accounts", "chat", "knowledge", "pages", "config")
THE_RULE = {Path("knowledge/access.py")}


def _staff_reads(path: Path) -> list[int]:
    """Lines of `path` that read an `is_staff` attribute (setting one is not deciding)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr == "is_staff"
        and isinstance(node.ctx, ast.Load)
    ]


def test_no_product_module_decides_staff_by_itself():
    found = {}
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            relative = path.relative_to(ROOT)
            if relative in THE_RULE or "migrations" in relative.parts:
                continue
            lines = _staff_reads(path)
            if lines:
                found[str(relative)] = lines
            if "IsAdminUser" in path.read_text(encoding="utf-8"):
                found.setdefault(str(relative), []).append("IsAdminUser")
    assert found == {}


@pytest.mark.django_db
def test_the_staff_check(django_user_model):
    staff = django_user_model(username="s", is_staff=True, is_active=True)
    assert user_is_staff(staff)
    assert not user_is_staff(django_user_model(username="i", is_staff=True, is_active=False))
    assert not user_is_staff(django_user_model(username="m", is_staff=False, is_active=True))
    assert not user_is_staff(AnonymousUser())
    assert not user_is_staff(None)
