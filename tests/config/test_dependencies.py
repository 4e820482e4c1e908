"""Every dependency `pyproject.toml` declares is used: imported by the product's code, or named
in it (a settings string such as "axes" or "django_redis.cache.RedisCache"), or on the short
list below of packages another library loads by itself. A dependency nothing uses is
installed, updated and audited for nothing (docs/decisions/0043-rate-limit-stores.md)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("config", "chat", "knowledge", "lab", "pages", "accounts")
# Loaded by another library, never imported by name here.
LOADED_BY_ANOTHER_LIBRARY = {
    "gguf": "transformers reads a .gguf LLM_MODEL_PATH through it (chat/answering/llm/local.py)",
    "accelerate": "transformers' from_pretrained loads the local model with it when installed",
}


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _modules_by_distribution() -> dict[str, set[str]]:
    modules: dict[str, set[str]] = {}
    for module, distributions in importlib.metadata.packages_distributions().items():
        for distribution in distributions:
            modules.setdefault(_normalised(distribution), set()).add(module)
    return modules


def _is_used(module: str, code: str) -> bool:
    name = re.escape(module)
    return bool(re.search(rf"^\s*(?:import|from)\s+{name}\b|[\"']{name}[\"'.]", code, re.M))


def test_every_declared_dependency_is_imported_or_named_by_the_product():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    code = "\n".join(
        path.read_text(errors="ignore")
        for folder in PRODUCT
        for path in (ROOT / folder).rglob("*.py")
    )
    modules = _modules_by_distribution()
    unused = []
    for requirement in declared:
        name = _normalised(re.match(r"[A-Za-z0-9_.-]+", requirement).group())
        if name in LOADED_BY_ANOTHER_LIBRARY:
            continue
        assert name in modules, f"{name} is declared but not installed"
        if not any(_is_used(module, code) for module in modules[name]):
            unused.append(name)
    assert unused == [], f"declared in pyproject.toml, used nowhere: {unused}"


def test_the_check_finds_an_unused_dependency():
    assert _is_used("axes", 'INSTALLED_APPS = ["axes"]')
    assert _is_used("django_redis", 'BACKEND = "django_redis.cache.RedisCache"')
    assert _is_used("bleach", "import bleach")
    assert not _is_used("django_ratelimit", "from chat.ratelimit import chat_throttled")
