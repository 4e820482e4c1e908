"""Which files a list of paths given to ingestion stands for, and reading a file without
following a symbolic link out of the folder it belongs to.

Symbolic links are never followed: a link inside a synced folder (to a file or a folder,
inside the folder or out of it) is listed apart and never read, and every file is opened
one path component at a time from its root with `O_NOFOLLOW`, so a link swapped in after the
folder was listed is refused, not followed. Why:
docs/decisions/0135-synced-files-read-inside-their-root.md.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

from django.conf import settings

from knowledge.parsers import is_supported

_NOFOLLOW = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC


class PathRefused(OSError):
    """A path that is not read: outside its root, through a symbolic link, or not a regular
    file. Its message is meant for the operator."""


def paths_expand(
    paths: Iterable[Path],
    *,
    unreadable: list[Path] | None = None,
    links: list[Path] | None = None,
) -> tuple[list[Path], list[Path]]:
    """(files to ingest, files skipped). Directories are walked recursively, hidden entries
    and office lock files ignored, files of unsupported types skipped; a file named
    explicitly is always kept (so that its type is refused with a clear error). Symbolic
    links met in a walk (to files or folders, wherever they point) are neither followed nor
    kept: they are appended to `links` when it is given. Directories that could not be
    listed are appended to `unreadable` when it is given (their files are then missing from
    the result)."""
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

    def link_found(path: Path) -> None:
        if links is not None:
            links.append(path)

    for path in paths:
        path = Path(path)
        if not path.is_dir():
            keep(path)
            continue
        for root, dirs, names in os.walk(path, onerror=listing_failed):  # links not followed
            kept_dirs = []
            for name in sorted(dirs):
                if name.startswith("."):
                    continue
                if os.path.islink(os.path.join(root, name)):
                    link_found(Path(root) / name)
                else:
                    kept_dirs.append(name)
            dirs[:] = kept_dirs
            for name in sorted(names):
                if name.startswith((".", "~$")):
                    continue
                file = Path(root) / name
                if file.is_symlink():
                    link_found(file)
                elif is_supported(name):
                    keep(file)
                else:
                    skipped.append(file)
    return files, skipped


def path_within(path: Path | str, root: Path | str) -> bool:
    """Whether `path`, made absolute and normalised (no link resolved), is `root` or lies
    under it."""
    path_text = os.path.normpath(os.path.abspath(path))
    root_text = os.path.normpath(os.path.abspath(root))
    return path_text == root_text or path_text.startswith(root_text.rstrip(os.sep) + os.sep)


def file_open_within(path: Path | str, *, root: Path | str) -> BinaryIO:
    """Open the regular file `path` for reading in binary, reaching it from `root` one
    component at a time without following any symbolic link below `root` (`O_NOFOLLOW` on
    each directory and on the file, each opened relative to the one before). Raises
    `PathRefused` when `path` is not under `root`, when any component below `root` is a
    symbolic link, or when the file is not a regular file (a FIFO, a device: never blocks);
    other `OSError`s as the system gives them."""
    root_text = os.path.normpath(os.path.abspath(root))
    path_text = os.path.normpath(os.path.abspath(path))
    if path_text == root_text or not path_within(path_text, root_text):
        raise PathRefused(errno.EACCES, f"Outside the folder {root_text}; not read", path_text)
    parts = os.path.relpath(path_text, root_text).split(os.sep)
    directory = os.open(root_text, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, _NOFOLLOW | os.O_DIRECTORY, dir_fd=directory)
            except OSError as exc:
                _refuse_if_link(exc, path_text)
                raise
            os.close(directory)
            directory = inner
        try:
            descriptor = os.open(parts[-1], _NOFOLLOW | os.O_NONBLOCK, dir_fd=directory)
        except OSError as exc:
            _refuse_if_link(exc, path_text)
            raise
    finally:
        os.close(directory)
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise PathRefused(errno.EACCES, "Not a regular file; not read", path_text)
    os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


def file_open_nofollow(path: Path | str) -> BinaryIO:
    """Open the file `path` named by the operator (`manage.py ingest`): its folder as the
    system resolves it, the file itself only when it is not a symbolic link (a link swapped
    in after the folder was listed is refused); see `file_open_within`."""
    path = Path(path)
    parent = os.path.realpath(path.parent)
    return file_open_within(Path(parent) / path.name, root=Path(parent).anchor)


def _refuse_if_link(exc: OSError, path: str) -> None:
    # O_NOFOLLOW on a link: ELOOP; O_DIRECTORY|O_NOFOLLOW on a link: ENOTDIR (Linux).
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        raise PathRefused(
            errno.ELOOP, "A symbolic link; links are not followed, not read", path
        ) from exc


def sync_allowed_roots() -> list[str]:
    """The folders watched folders and syncs must lie in (`SYNC_ALLOWED_ROOTS`, each with
    its links resolved); empty: anywhere."""
    return [os.path.realpath(root) for root in settings.SYNC_ALLOWED_ROOTS]


def sync_root_refusal(root: str) -> str:
    """Why the folder `root` (as `folder_root` gives it) may not be synced, or "" when it
    may: it must lie in one of `SYNC_ALLOWED_ROOTS` when that is set."""
    allowed = sync_allowed_roots()
    if not allowed or any(path_within(root, folder) for folder in allowed):
        return ""
    return (
        f"{root} is outside the folders Sourced may sync (SYNC_ALLOWED_ROOTS: "
        f"{', '.join(allowed)})."
    )
