"""The modules of chat/answering/ import one another without cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import chat.answering

PACKAGE = Path(chat.answering.__file__).resolve().parent


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["chat.answering", *parts])


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules `path` imports, at module level or inside a function."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        found.update(name for name in names if name in modules)
    return found


def _cycle_from(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    path: list[str] = []
    done: set[str] = set()

    def visit(module: str) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        path.append(module)
        for target in sorted(graph[module]):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(module)
        return None

    return visit(start)


def test_answering_modules_import_one_another_without_cycles():
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {
        name: _imports(path, set(paths)) - {name, "chat.answering"} for name, path in paths.items()
    }
    assert "chat.answering.pipeline" in graph
    assert graph["chat.answering.pipeline"]  # the walk sees its imports

    cycles = [cycle for name in sorted(graph) if (cycle := _cycle_from(name, graph))]

    assert cycles == []
