"""The product apps never import the lab (`evaluate`, `bench`) nor what only the lab uses."""

from __future__ import annotations

import ast
from pathlib import Path

from django.conf import settings

PRODUCT_PACKAGES = ("chat", "knowledge", "pages", "config")
# Third-party packages only the lab imports (they stay installed for it).
LAB_ONLY = ("lab", "websockets", "psutil")


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module `path` imports, anywhere in the file (function bodies included), and every
    module named by a literal `import_module("…")`/`__import__("…")`, with its line."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def _product_files() -> list[Path]:
    base = Path(settings.BASE_DIR)
    return sorted(path for package in PRODUCT_PACKAGES for path in (base / package).rglob("*.py"))


def test_the_walk_sees_every_kind_of_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import lab\n"
        "from lab.evaluation import runner\n"
        "def later():\n"
        "    import websockets.asyncio.client\n"
        "    importlib.import_module('lab.benchmark.run')\n"
    )
    assert [name for _, name in _imported_modules(sample)] == [
        "lab",
        "lab.evaluation",
        "websockets.asyncio.client",
        "lab.benchmark.run",
    ]


def test_the_product_apps_never_import_the_lab():
    files = _product_files()
    assert len(files) > 50, "the product packages were not found"
    offending = [
        f"{path.relative_to(settings.BASE_DIR)}:{line} imports {name}"
        for path in files
        for line, name in _imported_modules(path)
        if name.split(".")[0] in LAB_ONLY
    ]
    assert offending == []
