"""Sources: a folder, a web site or a WebDAV share, synced by `manage.py sync SOURCE` and
re-scanned by the ingestion worker on each source's interval.

`location_sync` syncs any location (its kind by its spelling, knowledge/sources/locations.py);
`sources_claim_due` and `source_sync` are the worker's schedule
(docs/decisions/0116-watched-folders-scheduled-by-the-worker.md): a due source is claimed by
moving its `next_run_at` one interval forward in one conditional UPDATE, re-scanned as a task,
and given its next run one interval after the re-scan ended.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.utils import timezone

from knowledge.models import Collection, Source, SyncRun
from knowledge.services.ingest_window import Progress
from knowledge.services.sync import SyncBusy, SyncError, SyncReport, folder_root, folder_sync
from knowledge.sources.locations import (
    LocationError,
    credentials_header,
    remote_root,
    share_http_url,
    source_kind,
    url_origin,
)

logger = logging.getLogger(__name__)


class SourceConfigError(SyncError):
    """The location or its credentials are unusable (no run was recorded)."""


def location_root(location: str) -> str:
    """The root a sync of `location` records (its documents' `sync_root`): a folder resolved,
    a URL in one spelling. `LocationError` for a location of no known kind."""
    if source_kind(location) == Source.Kind.FOLDER:
        return folder_root(location)
    return remote_root(location)


def location_sync(
    *,
    location: str,
    collection: Collection | None = None,
    dry_run: bool = False,
    allow_empty: bool = False,
    source: Source | None = None,
    credentials_env: str = "",
    trigger: str = "command",
    progress: Progress | None = None,
) -> SyncReport:
    """Mirror the folder, site or share `location` into the knowledge base with the folder
    sync's semantics (`folder_sync`'s contract; `SyncError` having changed nothing).
    `credentials_env` names the environment variable holding a site's or share's
    credentials (the source's own when `source` is given)."""
    try:
        kind = source_kind(location)
        if kind == Source.Kind.FOLDER:
            return folder_sync(
                path=location,
                collection=collection,
                dry_run=dry_run,
                allow_empty=allow_empty,
                folder=source,
                trigger=trigger,
                progress=progress,
            )
        root = remote_root(location)
        headers = credentials_header(source.credentials_env if source else credentials_env)
    except LocationError as exc:
        raise SourceConfigError(str(exc)) from exc
    # Imported here: a web process imports this module (the admin's "re-scan now") but never
    # walks a site or share, and the HTTP client and XML parsers cost it start-up time.
    from knowledge.sources.fetch import Fetcher
    from knowledge.sources.remote import remote_sync
    from knowledge.sources.web import site_walk
    from knowledge.sources.webdav import share_walk

    walk = site_walk if kind == Source.Kind.SITE else share_walk
    http_url = root if kind == Source.Kind.SITE else share_http_url(root)
    fetcher = Fetcher(origin=url_origin(http_url), headers=headers)
    try:
        return remote_sync(
            root=root,
            walker=lambda owned: walk(root=root, owned=owned, fetcher=fetcher),
            collection=collection,
            dry_run=dry_run,
            allow_empty=allow_empty,
            source=source,
            trigger=trigger,
            progress=progress,
        )
    finally:
        fetcher.close()


def sources_claim_due(*, now: datetime | None = None) -> list[int]:
    """The enabled sources whose re-scan is due, each claimed by moving its `next_run_at`
    one interval forward in the same statement (so that of several workers only one claims
    it). Returns their ids."""
    now = now or timezone.now()
    claimed: list[int] = []
    due = Source.objects.filter(enabled=True, next_run_at__lte=now).order_by("pk")
    for source_id, minutes in due.values_list("pk", "interval_minutes"):
        if Source.objects.filter(pk=source_id, enabled=True, next_run_at__lte=now).update(
            next_run_at=now + timedelta(minutes=minutes)
        ):
            claimed.append(source_id)
    return claimed


def source_sync(*, source_id: int) -> SyncRun | None:
    """Re-scan one source into its collection, then set its next re-scan one interval after
    this one ended. Returns the run recorded, or None when the source was deleted or
    disabled meanwhile or another sync of it is running. A source that cannot be synced
    (missing, unmounted, down, refusing the credentials) gets a failed run with the reason."""
    source = Source.objects.select_related("collection").filter(pk=source_id).first()
    if source is None or not source.enabled:
        return None
    try:
        return location_sync(
            location=source.location,
            collection=source.collection,
            source=source,
            trigger="worker",
        ).run
    except SyncBusy as exc:
        logger.info("Source %s: %s", source.pk, exc)
        return None
    except SourceConfigError as exc:  # failed before a run was recorded: record it
        return SyncRun.objects.create(
            root=source.location,
            source=source,
            trigger="worker",
            status=SyncRun.Status.FAILED,
            finished_at=timezone.now(),
            message=str(exc),
        )
    except SyncError:  # recorded on the run
        return SyncRun.objects.filter(source=source).order_by("-started_at", "-pk").first()
    finally:
        minutes = (
            Source.objects.filter(pk=source_id).values_list("interval_minutes", flat=True).first()
        )
        if minutes:
            Source.objects.filter(pk=source_id).update(
                next_run_at=timezone.now() + timedelta(minutes=minutes)
            )


def sources_rescan_now(*, ids: list[int]) -> int:
    """Make the given sources due now; returns how many."""
    return Source.objects.filter(pk__in=ids).update(next_run_at=timezone.now())
