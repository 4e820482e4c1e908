"""Folder sync: a folder mirrored into the knowledge base (`manage.py sync`, watched folders).

A sync owns the documents whose `Document.sync_root` is its folder, and only those: it
ingests the folder's new files (owned from their first save), re-reads the files whose bytes
changed (sha256 against `Document.content_hash`), follows a file moved or renamed inside the
folder (same bytes: the document's `source` changes, nothing is re-read or re-embedded), and
deletes the documents of files that left the folder. A document uploaded in the admin,
ingested from another path, or ingested by hand from inside the folder has another (or no)
`sync_root` and is never touched; its file is reported as skipped.

Each step is atomic on its own (one document written in one transaction by ingestion, a move
in one UPDATE, deletions in transactions of `_DELETE_BATCH` documents), and a sync decides
everything from the folder and the database as they are when it starts, so a sync
interrupted at any point leaves each document in its old or its new state and the next run
finishes the job. Why deletion and not disabling, and what guards it:
docs/decisions/0115-folder-sync-owns-its-documents-and-deletes-what-left.md.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from knowledge.chunking import CHUNKER_VERSION
from knowledge.models import Collection, Document, Source, SyncRun
from knowledge.services.ingest import documents_ingest, title_from_name
from knowledge.services.ingest_window import Progress
from knowledge.services.paths import path_within, paths_expand, sync_root_refusal
from knowledge.signals import knowledge_changed_send

logger = logging.getLogger(__name__)

_DELETE_BATCH = 100  # documents deleted per transaction
_ERRORS_KEPT = 200  # failed files listed on a run record
_RUNS_KEPT = 100  # runs of a folder kept; older ones are deleted when a run starts
_LOCK_NAMESPACE = b"sourced-folder-sync:"


class SyncError(Exception):
    """The folder cannot be synced as a whole (missing, unreadable, apparently unmounted,
    already being synced); the message is meant for the operator. Nothing was changed."""


class SyncBusy(SyncError):
    """Another sync of the same folder is running."""


@dataclass
class SyncPlan:
    """What a sync of `root` does, decided before it changes anything."""

    root: str
    new: list[Path] = field(default_factory=list)
    changed: list[Path] = field(default_factory=list)
    moved: list[tuple[Document, Path]] = field(default_factory=list)  # document, its new file
    gone: list[Document] = field(default_factory=list)
    unchanged: int = 0
    not_owned: list[Path] = field(default_factory=list)  # files of documents of another origin
    unsupported: list[Path] = field(default_factory=list)
    links: list[Path] = field(default_factory=list)  # symbolic links: never followed
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (path, error)


@dataclass
class SyncReport:
    """What a sync did (or, for a dry run, would do)."""

    plan: SyncPlan
    added: int = 0
    updated: int = 0
    moved: int = 0
    removed: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)  # (path, error)
    run: SyncRun | None = None  # None for a dry run

    @property
    def skipped(self) -> int:
        return len(self.plan.not_owned) + len(self.plan.unsupported) + len(self.plan.links)


def folder_root(path: Path | str) -> str:
    """The string a sync of `path` records as its documents' `sync_root`: the folder's
    absolute path with symbolic links resolved."""
    return str(Path(path).expanduser().resolve())


def folder_sync(
    *,
    path: Path | str,
    collection: Collection | None = None,
    dry_run: bool = False,
    allow_empty: bool = False,
    folder: Source | None = None,
    trigger: str = "command",
    progress: Progress | None = None,
) -> SyncReport:
    """Mirror the folder `path` (walked recursively) into the knowledge base: new files
    ingested into `collection` (default: General), changed files re-read, moved files
    followed, documents of files that left the folder deleted; documents the sync does not
    own (`Document.sync_root`) never touched. One file failing never stops the others; its
    error is in the report.

    `dry_run` reads the folder and the database and writes nothing (no run is recorded).
    Otherwise the run is recorded (`SyncRun`, linked to `folder` when given) whatever its
    end. Raises `SyncError`, having changed nothing, when the folder is missing or
    unreadable, when another sync of it is running (`SyncBusy`, then no run is recorded), or
    when it holds no file at all while the sync owns documents (an unmounted share looks like
    that) unless `allow_empty`. Any other exception is recorded on the run and raised; what
    was done before it stays done, each document whole (the next run finishes the job).
    `progress(1)` as each file to ingest is done."""
    root = folder_root(path)
    if dry_run:
        _folder_check(root)
        return SyncReport(plan=sync_plan(root=root, allow_empty=allow_empty))
    with _folder_locked(root):
        run = _run_start(root=root, folder=folder, trigger=trigger)
        try:
            _folder_check(root)
            plan = sync_plan(root=root, allow_empty=allow_empty)
            report = _plan_apply(plan, collection=collection, progress=progress)
        except SyncError as exc:
            _run_finish(run, status=SyncRun.Status.FAILED, message=str(exc))
            raise
        except Exception as exc:  # recorded on the run, then raised for the caller to log
            _run_finish(run, status=SyncRun.Status.FAILED, message=f"Unexpected error: {exc}")
            raise
        report.run = _run_finish(run, status=SyncRun.Status.FINISHED, report=report)
        return report


def _folder_check(root: str) -> None:
    refusal = sync_root_refusal(root)
    if refusal:
        raise SyncError(refusal)
    if not Path(root).is_dir():
        raise SyncError(f"No such folder: {root}")
    if not os.access(root, os.R_OK | os.X_OK):
        raise SyncError(f"Cannot read the folder {root}")


def sync_plan(*, root: str, allow_empty: bool = False) -> SyncPlan:
    """Compare the folder `root` (as given by `folder_root`) with the documents the sync
    owns, reading each file's bytes once for its hash. Raises `SyncError` when the folder
    lists no file at all while the sync owns documents, unless `allow_empty`."""
    plan = SyncPlan(root=root)
    unlisted: list[Path] = []
    files, plan.unsupported = paths_expand([Path(root)], unreadable=unlisted, links=plan.links)
    if unlisted and Path(root) in unlisted:
        raise SyncError(f"Cannot list the folder {root}")
    owned = {
        document.source: document
        for document in Document.objects.filter(sync_root=root).only(
            "pk", "source", "title", "content_hash", "status", "chunker_version"
        )
    }
    if not files and not plan.unsupported and not plan.links and owned and not allow_empty:
        raise SyncError(
            f"The folder {root} holds no file at all, but {len(owned)} document(s) came from "
            "it: is it mounted? Nothing was removed. If it was emptied on purpose, sync it "
            "with --allow-empty."
        )
    by_source = {}
    for file in files:
        source = str(file.resolve())
        if path_within(source, root):
            by_source[source] = file
        else:  # reached through a link swapped in while listing: never read
            plan.links.append(file)
    not_owned = _sources_not_owned(root=root, sources=[s for s in by_source if s not in owned])
    new_hashes: dict[str, list[Path]] = {}
    for source, file in by_source.items():
        if source in not_owned:
            plan.not_owned.append(file)
            continue
        try:
            content_hash = _file_hash(file)
        except OSError as exc:
            plan.unreadable.append((str(file), f"Could not read the file: {exc}"))
            continue
        document = owned.get(source)
        if document is None:
            plan.new.append(file)
            new_hashes.setdefault(content_hash, []).append(file)
        elif (
            document.content_hash == content_hash
            and document.status == Document.Status.READY
            and document.chunker_version == CHUNKER_VERSION
        ):
            plan.unchanged += 1
        else:
            plan.changed.append(file)
    listed = set(by_source) | {path for path, _ in plan.unreadable}
    for source, document in owned.items():
        if source in listed or _under_any(source, unlisted):
            continue  # still there, or in a folder that could not be listed: kept
        moved_to = _move_target(document, new_hashes)
        if moved_to is not None:
            plan.moved.append((document, moved_to))
            plan.new.remove(moved_to)
        else:
            plan.gone.append(document)
    for directory in unlisted:
        plan.unreadable.append((str(directory), "Could not list the folder; its files are kept."))
    return plan


def _sources_not_owned(*, root: str, sources: list[str]) -> set[str]:
    """Those of `sources` that are documents of another origin than the sync of `root`."""
    found: set[str] = set()
    for start in range(0, len(sources), 1000):
        found.update(
            Document.objects.filter(source__in=sources[start : start + 1000])
            .exclude(sync_root=root)
            .values_list("source", flat=True)
        )
    return found


def _move_target(document: Document, new_hashes: dict[str, list[Path]]) -> Path | None:
    """A new file holding exactly the bytes of `document` (a ready one, cut by today's
    chunker) under the same extension: where the document's file moved to. Each new file
    is given to one document only."""
    if document.status != Document.Status.READY or document.chunker_version != CHUNKER_VERSION:
        return None
    candidates = new_hashes.get(document.content_hash, [])
    suffix = Path(document.source).suffix.lower()
    for file in candidates:
        if file.suffix.lower() == suffix:
            candidates.remove(file)
            return file
    return None


def _under_any(source: str, directories: list[Path]) -> bool:
    return any(source.startswith(str(directory) + os.sep) for directory in directories)


def _file_hash(file: Path) -> str:
    with file.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _plan_apply(
    plan: SyncPlan, *, collection: Collection | None, progress: Progress | None
) -> SyncReport:
    """Moves first (one UPDATE each), then ingestion, then deletions: a file copied or moved
    finds the embeddings of its old document still stored."""
    report = SyncReport(plan=plan, failed=list(plan.unreadable))
    for document, file in plan.moved:
        if _document_move(document, root=plan.root, file=file):
            report.moved += 1
        else:
            plan.new.append(file)  # its old document changed meanwhile: ingested as new
    to_ingest = [*plan.new, *plan.changed]
    if to_ingest:
        outcomes = documents_ingest(
            paths=to_ingest,
            title=None,
            enabled=True,
            dry_run=False,
            progress=progress,
            collection=collection,
            sync_root=plan.root,
        )
        outcomes_count(outcomes, report=report)
    report.removed = _documents_remove(plan.gone, root=plan.root)
    return report


def _document_move(document: Document, *, root: str, file: Path) -> bool:
    """Point the document at the file it moved to, if it is still the sync's and still at its
    old source. Its title follows the file's name when it was made from the old name."""
    old = Path(document.source)
    fields: dict = {"source": str(file.resolve()), "updated_at": timezone.now()}
    if document.title == title_from_name(old.name):
        fields["title"] = title_from_name(file.name)
    try:
        with transaction.atomic():
            moved = Document.objects.filter(
                pk=document.pk, sync_root=root, source=document.source
            ).update(**fields)
    except IntegrityError:  # another document took the new path meanwhile
        return False
    return bool(moved)


def _documents_remove(documents: list[Document], *, root: str) -> int:
    """Delete the sync's documents whose file is still missing, in batches by pk, each in its
    own transaction; returns how many were deleted."""
    ids = sorted(document.pk for document in documents)
    removed = 0
    for start in range(0, len(ids), _DELETE_BATCH):
        with transaction.atomic():
            batch = list(
                Document.objects.filter(pk__in=ids[start : start + _DELETE_BATCH], sync_root=root)
                .select_for_update()
                .only("pk", "source")
            )
            gone = [document.pk for document in batch if not _regular_file(document.source)]
            if gone:
                removed += (
                    Document.objects.filter(pk__in=gone).delete()[1].get(Document._meta.label, 0)
                )
    if removed:
        knowledge_changed_send()
    return removed


def _regular_file(source: str) -> bool:
    """Whether `source` is a regular file itself (a symbolic link put in its place is not)."""
    try:
        return stat.S_ISREG(os.lstat(source).st_mode)
    except OSError:
        return False


@contextmanager
def _folder_locked(root: str) -> Iterator[None]:
    """Hold PostgreSQL's session advisory lock of the folder for the block; raises
    `SyncError` when another process holds it. A process that dies releases it."""
    digest = hashlib.sha256(_LOCK_NAMESPACE + root.encode()).digest()
    key = int.from_bytes(digest[:8], "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        if not cursor.fetchone()[0]:
            raise SyncBusy(f"Another sync of {root} is running; try again when it is done.")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


def _run_start(*, root: str, folder: Source | None, trigger: str) -> SyncRun:
    """Record a run of `root` (a folder, or a site's or share's root URL); earlier runs of it
    still marked running were interrupted (the caller holds the root's lock, so none of them
    is running). Only the last `_RUNS_KEPT` runs of a root are kept."""
    SyncRun.objects.filter(root=root, status=SyncRun.Status.RUNNING).update(
        status=SyncRun.Status.INTERRUPTED
    )
    older = SyncRun.objects.filter(root=root).order_by("-started_at", "-pk")[_RUNS_KEPT - 1 :]
    SyncRun.objects.filter(pk__in=list(older.values_list("pk", flat=True))).delete()
    if folder is None:
        folder = Source.objects.filter(location=root).first()
    return SyncRun.objects.create(root=root, source=folder, trigger=trigger)


def outcomes_count(outcomes, *, report: SyncReport) -> None:
    """Add the ingestion outcomes of a sync's new and changed files to `report`: added,
    updated, failed, or unchanged after all (changed back since the plan was made)."""
    for outcome in outcomes:
        if outcome.action == "new":
            report.added += 1
        elif outcome.action == "updated":
            report.updated += 1
        elif outcome.action == "unchanged":
            report.plan.unchanged += 1
        else:
            report.failed.append((outcome.source, outcome.error))


def _run_finish(
    run: SyncRun, *, status: str, report: SyncReport | None = None, message: str = ""
) -> SyncRun:
    run.status = status
    run.finished_at = timezone.now()
    run.message = message
    if report is not None:
        run.added, run.updated = report.added, report.updated
        run.moved, run.removed = report.moved, report.removed
        run.unchanged, run.skipped = report.plan.unchanged, report.skipped
        run.failed = len(report.failed)
        run.errors = [[path, error] for path, error in report.failed[:_ERRORS_KEPT]]
    run.save()
    return run


# --- Folder sources ------------------------------------------------------------------------


def folder_path_clean(path: str, *, exclude_pk: int | None = None) -> str:
    """A folder source's path as stored (`folder_root`), or `ValueError` with a readable
    message: it must be absolute, an existing readable folder, and not another watched
    folder's, nor inside or around one (a file is owned by one sync only), and inside
    `SYNC_ALLOWED_ROOTS` when that is set."""
    raw = path.strip()
    if not raw or not Path(raw).expanduser().is_absolute():
        raise ValueError("Give the folder's absolute path, e.g. /srv/shared/policies.")
    root = folder_root(raw)
    if not Path(root).is_dir():
        raise ValueError(f"No such folder on this machine: {root}")
    if not os.access(root, os.R_OK | os.X_OK):
        raise ValueError(f"The folder {root} cannot be read by Sourced.")
    refusal = sync_root_refusal(root)
    if refusal:
        raise ValueError(refusal)
    others = Source.objects.filter(kind=Source.Kind.FOLDER).exclude(pk=exclude_pk)
    others = others.values_list("location", flat=True)
    for other in others:
        if root == other:
            raise ValueError(f"{root} is already a watched folder.")
        if root.startswith(other + os.sep) or other.startswith(root + os.sep):
            raise ValueError(f"{root} overlaps the watched folder {other}.")
    return root
