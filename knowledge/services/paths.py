"""Which files a list of paths given to ingestion stands for."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from knowledge.parsers import is_supported


def paths_expand(
    paths: Iterable[Path], *, unreadable: list[Path] | None = None
) -> tuple[list[Path], list[Path]]:
    """(files to ingest, files skipped). Directories are walked recursively, hidden entries
    and office lock files ignored, files of unsupported types skipped; a file named
    explicitly is always kept (so that its type is refused with a clear error). Directories
    that could not be listed are appended to `unreadable` when it is given (their files are
    then missing from the result)."""
    files: list[Path] = []
    skipped: list[Path] = []
    seen: set[Path] = set()

    def keep(file: Path) -> None:
        resolved = file.resolve()
        if resolved not in seen:
            seen.add(resolved)
            files.append(file)

    def listing_failed(error: OSError) -> None:
        if unreadable is not None:
            unreadable.append(Path(error.filename))

    for path in paths:
        path = Path(path)
        if not path.is_dir():
            keep(path)
            continue
        for root, dirs, names in os.walk(path, onerror=listing_failed):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(names):
                if name.startswith((".", "~$")):
                    continue
                file = Path(root) / name
                if is_supported(name):
                    keep(file)
                else:
                    skipped.append(file)
    return files, skipped
