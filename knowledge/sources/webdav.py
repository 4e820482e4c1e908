"""A WebDAV share walked with PROPFIND: its files read by the existing parsers.

`share_walk` lists the share's folder and each sub-folder (`PROPFIND`, `Depth: 1`, breadth
first, at most `SOURCE_MAX_DEPTH` folders deep), never a URL outside the share's folder on
its host. A file whose ETag is the one its document was read with (and whose document is
ready, cut by today's chunker) is unchanged without a download; any other supported file is
downloaded (`GET`, at most `SOURCE_MAX_BYTES`) for the sync to compare by hash, follow as a
move, or ingest. A document whose file is no longer listed in a folder that was listed is
gone; one under a folder that could not be listed (an error, a bound) is kept. Basic or
bearer credentials come from the environment variable the source names
(knowledge/sources/locations.py), and a refused or missing share fails the whole run,
changing nothing (docs/decisions/0160-sources-sites-and-webdav-shares.md).
"""

from __future__ import annotations

from collections import deque
from pathlib import PurePosixPath
from urllib.parse import unquote, urlsplit

import lxml.etree
from django.conf import settings

from knowledge.models import Document
from knowledge.parsers import is_supported
from knowledge.services.sync import SyncError
from knowledge.sources.fetch import Fetcher, FetchError
from knowledge.sources.locations import share_http_url, share_scope, url_normalize
from knowledge.sources.remote import Fetched, Walk, is_current

_PROPFIND = (
    b'<?xml version="1.0" encoding="utf-8"?>'
    b'<d:propfind xmlns:d="DAV:"><d:prop>'
    b"<d:resourcetype/><d:getetag/><d:getcontentlength/><d:getlastmodified/>"
    b"</d:prop></d:propfind>"
)
_DAV = "{DAV:}"


def share_walk(*, root: str, owned: dict[str, Document], fetcher: Fetcher) -> Walk:
    """Walk the share `root` (webdav(s)://host/path/, see the module's docstring).
    `SyncError`, having changed nothing, when its folder cannot be listed (refused
    credentials, no such folder, the server or network failing)."""
    walk = Walk()
    scope = share_scope(root)
    base = share_http_url(root)
    listed: set[str] = set()
    unlisted: list[str] = []  # http URLs of folders whose content is unknown: their files kept
    folders = deque([(base, 0)])
    files: list[tuple[str, str]] = []  # (http url, etag)
    while folders:
        folder, depth = folders.popleft()
        if fetcher.requests >= settings.SOURCE_MAX_PAGES or fetcher.out_of_time():
            walk.log.append(_budget_line(fetcher, f"{len(folders) + 1} folder(s) not listed"))
            unlisted.extend([folder, *(f for f, _ in folders)])
            break
        try:
            entries = _list(fetcher, folder)
        except (FetchError, _ListingError) as exc:
            if folder == base:
                raise SyncError(f"The share {root} could not be listed: {exc}") from exc
            walk.unreadable.append((folder, f"Could not list the folder ({exc}); its files kept."))
            unlisted.append(folder)
            continue
        for url, is_folder, etag in entries:
            if not scope.holds(url):
                walk.log.append(f"{url} is outside the share; ignored.")
                continue
            name = _name(url)
            if url == folder or not name:
                continue
            if name.startswith((".", "~$")):
                continue
            if is_folder:
                if depth + 1 > settings.SOURCE_MAX_DEPTH:
                    walk.log.append(
                        f"{url} is more than {settings.SOURCE_MAX_DEPTH} folders deep "
                        "(SOURCE_MAX_DEPTH); not listed, its files kept."
                    )
                    unlisted.append(url if url.endswith("/") else url + "/")
                else:
                    folders.append((url if url.endswith("/") else url + "/", depth + 1))
            elif is_supported(name):
                files.append((url, etag))
            else:
                walk.unsupported.append(_source(root, base, url))
    for url, etag in files:
        source = _source(root, base, url)
        listed.add(source)
        document = owned.get(source)
        meta = (document.metadata or {}) if document is not None else {}
        if document is not None and etag and meta.get("etag") == etag and is_current(document):
            walk.unchanged[source] = {"url": url, "etag": etag}
            continue
        if fetcher.requests >= settings.SOURCE_MAX_PAGES or fetcher.out_of_time():
            walk.log.append(_budget_line(fetcher, "files left to download next run"))
            break
        try:
            response = fetcher.request("GET", url)
        except FetchError as exc:
            if exc.bound:
                walk.log.append(str(exc))
            else:
                walk.unreadable.append((source, str(exc)))
            continue
        if response.status in (404, 410):
            if document is not None:
                walk.gone.add(source)
            continue
        if response.status != 200:
            walk.unreadable.append((source, f"Answered {response.status}; kept as it was."))
            continue
        # Compared with the listing's ETag next time: stored as the listing gave it.
        etag = etag or response.headers.get("etag", "")
        walk.fetched.append(
            Fetched(source, _name(url), response.body, metadata={"url": url, "etag": etag})
        )
    prefixes = [_source(root, base, folder) for folder in unlisted]
    for source in owned:
        if source not in listed and not any(source.startswith(p) for p in prefixes):
            walk.gone.add(source)
    return walk


class _ListingError(Exception):
    pass


def _list(fetcher: Fetcher, folder: str) -> list[tuple[str, bool, str]]:
    """(url, is a folder, etag) of each member of `folder` (and of itself)."""
    response = fetcher.request(
        "PROPFIND",
        folder,
        headers={"Depth": "1", "Content-Type": "application/xml; charset=utf-8"},
        content=_PROPFIND,
    )
    if response.status in (401, 403):
        raise _ListingError(f"the server refused the credentials ({response.status})")
    if response.status != 207:
        raise _ListingError(f"PROPFIND answered {response.status}")
    try:
        tree = lxml.etree.fromstring(
            response.body,
            lxml.etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False),
        )
    except lxml.etree.XMLSyntaxError as exc:
        raise _ListingError(f"the listing is not XML ({exc})") from exc
    entries = []
    for item in tree.iter(f"{_DAV}response"):
        href = item.findtext(f"{_DAV}href") or ""
        url = url_normalize(href, base=folder)
        if url is None:
            continue
        is_folder, etag = False, ""
        for propstat in item.iter(f"{_DAV}propstat"):
            if " 200 " not in f" {propstat.findtext(f'{_DAV}status') or ''} ":
                continue
            prop = propstat.find(f"{_DAV}prop")
            if prop is None:
                continue
            kind = prop.find(f"{_DAV}resourcetype")
            if kind is not None and kind.find(f"{_DAV}collection") is not None:
                is_folder = True
            etag = prop.findtext(f"{_DAV}getetag") or etag
        entries.append((url, is_folder, etag))
    return entries


def _name(url: str) -> str:
    return unquote(PurePosixPath(urlsplit(url).path).name)


def _source(root: str, base: str, url: str) -> str:
    """The document source of a share's http URL: the same path under the share's own
    webdav(s):// spelling."""
    return root + url[len(base) :] if url.startswith(base) else url


def _budget_line(fetcher: Fetcher, what: str) -> str:
    if fetcher.out_of_time():
        return f"Time budget reached (SOURCE_RUN_SECONDS={settings.SOURCE_RUN_SECONDS:g}): {what}."
    return f"Request budget reached (SOURCE_MAX_PAGES={settings.SOURCE_MAX_PAGES}): {what}."
