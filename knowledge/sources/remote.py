"""Site and share syncs: what a walk of a remote source found, compared with the documents the
sync owns, then applied with the folder sync's semantics.

A walk (knowledge/sources/web.py, knowledge/sources/webdav.py) reports, for each page or
file: its bytes (`Fetched`), or that it is unchanged without its bytes (a 304, the same
ETag), or that it is gone (404/410, no longer listed by a share whose folder was listed), or
that it could not be read (kept as it was). `remote_plan` compares that with the documents
whose `Document.sync_root` is the source's root, exactly as `sync_plan` does for a folder:
change by sha256, a new page or file with the bytes of a gone one is that document moved,
documents of another origin are never touched. `remote_apply` moves, ingests, then deletes,
each step atomic on its own, so an interrupted run is finished by the next; the run is
recorded (`SyncRun`) and the source locked for its length as for a folder
(knowledge/services/sync.py;
docs/decisions/0115-folder-sync-owns-its-documents-and-deletes-what-left.md,
docs/decisions/0160-sources-sites-and-webdav-shares.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

from django.db import IntegrityError, transaction
from django.utils import timezone

from knowledge.chunking import CHUNKER_VERSION
from knowledge.models import Collection, Document, Source, SyncRun
from knowledge.parsers import SUPPORTED_TYPES
from knowledge.services.ingest import (
    SourcedFile,
    documents_ingest_sourced,
    title_from_name,
)
from knowledge.services.ingest_window import Progress
from knowledge.services.sync import (
    SyncError,
    SyncReport,
    _folder_locked,
    _run_finish,
    _run_start,
    outcomes_count,
)
from knowledge.signals import knowledge_changed_send

_DELETE_BATCH = 100
_LOG_KEPT = 200  # lines of a run's log kept on its record


@dataclass
class Fetched:
    """A page or file read whole: the document `source` (its URL) would hold these bytes."""

    source: str
    name: str  # the file name whose extension picks the parser
    data: bytes
    title: str | None = None  # a page's own title; None: the parser's, else the name's
    metadata: dict = field(default_factory=dict)  # url, validators, links, depth

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def __str__(self) -> str:
        return self.source


@dataclass
class Walk:
    """What a walk of a site or share found. An owned document none of these name is kept."""

    fetched: list[Fetched] = field(default_factory=list)
    unchanged: dict[str, dict] = field(default_factory=dict)  # source → metadata to refresh
    gone: set[str] = field(default_factory=set)
    unsupported: list[str] = field(default_factory=list)
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (url, error): kept
    log: list[str] = field(default_factory=list)


@dataclass
class RemotePlan:
    """What a sync of the site or share `root` does (the attributes of `SyncPlan`, with
    fetched pages where a folder has paths)."""

    root: str
    new: list[Fetched] = field(default_factory=list)
    changed: list[Fetched] = field(default_factory=list)
    moved: list[tuple[Document, Fetched]] = field(default_factory=list)
    gone: list[Document] = field(default_factory=list)
    unchanged: int = 0
    refreshed: list[tuple[int, dict]] = field(default_factory=list)  # unchanged: new validators
    not_owned: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)  # a folder's symbolic links: none here
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    log: list[str] = field(default_factory=list)


Walker = Callable[[dict[str, Document]], Walk]


def owned_documents(root: str) -> dict[str, Document]:
    """The documents the sync of `root` owns, by source."""
    return {
        document.source: document
        for document in Document.objects.filter(sync_root=root).only(
            "pk",
            "source",
            "title",
            "media_type",
            "content_hash",
            "status",
            "chunker_version",
            "metadata",
        )
    }


def is_current(document: Document) -> bool:
    """Ready and cut by today's chunker: its bytes unchanged, it needs no re-reading."""
    return document.status == Document.Status.READY and document.chunker_version == CHUNKER_VERSION


def remote_sync(
    *,
    root: str,
    walker: Walker,
    collection: Collection | None = None,
    dry_run: bool = False,
    allow_empty: bool = False,
    source: Source | None = None,
    trigger: str = "command",
    progress: Progress | None = None,
) -> SyncReport:
    """Walk the site or share `root` (`walker(owned documents)`), then mirror it as
    `folder_sync` mirrors a folder; the same contract (dry run, `SyncError` having changed
    nothing, the run recorded, one sync of a root at a time). The run's `log` says where
    the walk stopped at a bound."""
    if dry_run:
        owned = owned_documents(root)
        return SyncReport(plan=remote_plan(root, walker(owned), owned, allow_empty=allow_empty))
    with _folder_locked(root):
        run = _run_start(root=root, folder=source, trigger=trigger)
        plan: RemotePlan | None = None
        try:
            owned = owned_documents(root)
            plan = remote_plan(root, walker(owned), owned, allow_empty=allow_empty)
            report = remote_apply(plan, collection=collection, progress=progress)
        except SyncError as exc:
            _run_finish(run, status=SyncRun.Status.FAILED, message=str(exc))
            raise
        except Exception as exc:  # recorded on the run, then raised for the caller to log
            if plan is not None:
                run.log = plan.log[:_LOG_KEPT]
            _run_finish(run, status=SyncRun.Status.FAILED, message=f"Unexpected error: {exc}")
            raise
        run.log = plan.log[:_LOG_KEPT]
        report.run = _run_finish(run, status=SyncRun.Status.FINISHED, report=report)
        return report


def remote_plan(
    root: str, walk: Walk, owned: dict[str, Document], *, allow_empty: bool = False
) -> RemotePlan:
    """Compare a walk with the documents the sync owns. `SyncError` when the walk found
    nothing at all while the sync owns documents, unless `allow_empty`."""
    plan = RemotePlan(
        root=root, unsupported=walk.unsupported, unreadable=walk.unreadable, log=walk.log
    )
    if not (walk.fetched or walk.unchanged or walk.unreadable) and owned and not allow_empty:
        raise SyncError(
            f"{root} gave nothing at all, but {len(owned)} document(s) came from it: is it "
            "still there? Nothing was removed. If it was emptied on purpose, sync it with "
            "--allow-empty."
        )
    unknown = [fetched.source for fetched in walk.fetched if fetched.source not in owned]
    others = set(
        Document.objects.filter(source__in=unknown)
        .exclude(sync_root=root)
        .values_list("source", flat=True)
    )
    new_by_hash: dict[str, list[Fetched]] = {}
    for fetched in walk.fetched:
        document = owned.get(fetched.source)
        if fetched.source in others:
            plan.not_owned.append(fetched.source)
        elif document is None:
            plan.new.append(fetched)
            new_by_hash.setdefault(fetched.content_hash, []).append(fetched)
        elif document.content_hash == fetched.content_hash and is_current(document):
            plan.unchanged += 1
            _refresh(plan, document, fetched.metadata)
        else:
            plan.changed.append(fetched)
    for source, metadata in walk.unchanged.items():
        if source in owned:
            plan.unchanged += 1
            _refresh(plan, owned[source], metadata)
    for source in sorted(walk.gone):
        document = owned.get(source)
        if document is None:
            continue
        target = _move_target(document, new_by_hash)
        if target is not None:
            plan.moved.append((document, target))
            plan.new.remove(target)
        else:
            plan.gone.append(document)
    return plan


def _refresh(plan: RemotePlan, document: Document, metadata: dict) -> None:
    current = document.metadata if isinstance(document.metadata, dict) else {}
    if any(current.get(key) != value for key, value in metadata.items()):
        plan.refreshed.append((document.pk, metadata))


def _move_target(document: Document, new_by_hash: dict[str, list[Fetched]]) -> Fetched | None:
    """A new page or file holding exactly the bytes of the gone `document` (a current one)
    read as the same type: where it moved to."""
    if not is_current(document):
        return None
    candidates = new_by_hash.get(document.content_hash, [])
    for fetched in candidates:
        suffix = PurePosixPath(fetched.name).suffix.lower()
        if SUPPORTED_TYPES.get(suffix) == document.media_type:
            candidates.remove(fetched)
            return fetched
    return None


def document_name(url: str) -> str:
    """The last segment of a URL's path, unquoted ("" for a folder-like URL)."""
    return unquote(PurePosixPath(urlsplit(url).path).name) if not url.endswith("/") else ""


def remote_apply(
    plan: RemotePlan, *, collection: Collection | None, progress: Progress | None
) -> SyncReport:
    """Moves first (one UPDATE each), then ingestion, then the validators of unchanged
    documents, then deletions."""
    report = SyncReport(plan=plan, failed=list(plan.unreadable))  # type: ignore[arg-type]
    for document, fetched in plan.moved:
        if _document_move(document, root=plan.root, fetched=fetched):
            report.moved += 1
        else:
            plan.new.append(fetched)
    to_ingest = [*plan.new, *plan.changed]
    if to_ingest:
        outcomes = documents_ingest_sourced(
            files=[
                SourcedFile(
                    name=fetched.name,
                    data=fetched.data,
                    source=fetched.source,
                    title=fetched.title,
                    metadata=fetched.metadata,
                )
                for fetched in to_ingest
            ],
            progress=progress,
            collection=collection,
            sync_root=plan.root,
        )
        outcomes_count(outcomes, report=report)
    for document_id, metadata in plan.refreshed:
        with transaction.atomic():
            document = (
                Document.objects.select_for_update()
                .filter(pk=document_id, sync_root=plan.root)
                .only("pk", "metadata")
                .first()
            )
            if document is not None:
                document.metadata = {**(document.metadata or {}), **metadata}
                Document.objects.filter(pk=document.pk).update(metadata=document.metadata)
    report.removed = _documents_remove(plan.gone, root=plan.root)
    return report


def _document_move(document: Document, *, root: str, fetched: Fetched) -> bool:
    """Point the document at its new URL, if it is still the sync's and still at its old
    one. Its title follows a page's own title, or the file's name when made from the old."""
    fields: dict = {
        "source": fetched.source,
        "metadata": {**(document.metadata or {}), **fetched.metadata},
        "updated_at": timezone.now(),
    }
    if fetched.title:
        fields["title"] = fetched.title[:300]
    elif document.title == title_from_name(document_name(document.source) or "page"):
        fields["title"] = title_from_name(fetched.name)
    try:
        with transaction.atomic():
            moved = Document.objects.filter(
                pk=document.pk, sync_root=root, source=document.source
            ).update(**fields)
    except IntegrityError:
        return False
    return bool(moved)


def _documents_remove(documents: list[Document], *, root: str) -> int:
    """Delete the sync's documents found gone, if each is still the sync's and still at the
    source found gone, in batches by pk, each in its own transaction."""
    expected = {document.pk: document.source for document in documents}
    ids = sorted(expected)
    removed = 0
    for start in range(0, len(ids), _DELETE_BATCH):
        with transaction.atomic():
            batch = list(
                Document.objects.filter(pk__in=ids[start : start + _DELETE_BATCH], sync_root=root)
                .select_for_update()
                .only("pk", "source")
            )
            gone = [document.pk for document in batch if document.source == expected[document.pk]]
            if gone:
                removed += (
                    Document.objects.filter(pk__in=gone).delete()[1].get(Document._meta.label, 0)
                )
    if removed:
        knowledge_changed_send()
    return removed
