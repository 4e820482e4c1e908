"""A web site walked from its start URL: the pages under its path, politely and within bounds.

`site_walk` reads robots.txt (obeyed for `SOURCE_USER_AGENT`; its Crawl-delay slows the
walk), the sitemaps it names and /sitemap.xml, then visits breadth first the start URL, the
sitemaps' pages, the pages the sync already owns (each asked with its ETag and
Last-Modified: a 304 costs no download) and the links of each page read, never leaving the
start URL's scope (same host, same path prefix) and never past `SOURCE_MAX_DEPTH` links from
the start nor `SOURCE_MAX_PAGES` requests. Redirects are followed one hop at a time within
the scope only; a page naming another in-scope URL as canonical is stored under that URL, once.
A page's main content is taken by trafilatura, headings kept, and read by the HTML parser
(sections from the headings, the page's title as the document's title); PDFs and office files
in scope are read by their own parsers. 404 and 410 mean gone; a network error, a timeout or
a 5xx keeps the page as it was. Every bound reached leaves a line in the run's log
(docs/decisions/0160-sources-sites-and-webdav-shares.md,
docs/decisions/0161-hostile-sources-bounded.md).
"""

from __future__ import annotations

import hashlib
import html
from collections import deque
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import lxml.etree
import lxml.html
from django.conf import settings
from protego import Protego

from knowledge.models import Document
from knowledge.parsers import SUPPORTED_TYPES
from knowledge.services.sync import SyncError
from knowledge.sources.fetch import Fetcher, FetchError, Response
from knowledge.sources.locations import Scope, site_scope, url_normalize
from knowledge.sources.remote import Fetched, Walk, document_name, is_current

_HTML_TYPES = ("text/html", "application/xhtml+xml")
# Files linked from a site that are read (images are not: logos and icons are no documents).
_SITE_FILE_TYPES = {
    suffix: media
    for suffix, media in SUPPORTED_TYPES.items()
    if not media.startswith(("image/", "text/html"))
}
_SUFFIX_BY_TYPE = {media: suffix for suffix, media in reversed(_SITE_FILE_TYPES.items())}
_GONE = (404, 410)
_REDIRECTS = (301, 302, 303, 307, 308)
_MAX_HOPS = 5
_MAX_SITEMAPS = 20
_LINKS_KEPT = 500  # in-scope links remembered per page, followed when it answers 304
_ROBOTS_BYTES = 512 * 1024


def robots_agent() -> str:
    """The user-agent token robots.txt rules are matched against ("SourcedBot")."""
    return settings.SOURCE_USER_AGENT.split("/", 1)[0].strip()


@dataclass
class _Crawl:
    scope: Scope
    fetcher: Fetcher
    owned: dict[str, Document]
    walk: Walk = field(default_factory=Walk)
    robots: Protego | None = None
    queue: deque = field(default_factory=deque)  # (url, depth)
    queued: set[str] = field(default_factory=set)
    stored: set[str] = field(default_factory=set)  # sources given a result this run
    disallowed: int = 0
    too_deep: int = 0
    wrong_type: int = 0
    contents: set[str] = field(default_factory=set)  # sha256 of the pages found this run
    duplicates: int = 0

    def enqueue(self, url: str, depth: int) -> None:
        if url in self.queued or not self.scope.holds(url):
            return
        if depth > settings.SOURCE_MAX_DEPTH:
            self.too_deep += 1
            return
        self.queued.add(url)
        self.queue.append((url, depth))

    def allowed(self, url: str) -> bool:
        return self.robots is None or self.robots.can_fetch(url, robots_agent())

    def log(self, line: str) -> None:
        self.walk.log.append(line)


def site_walk(*, root: str, owned: dict[str, Document], fetcher: Fetcher) -> Walk:
    """Walk the site whose start URL is `root` (see the module's docstring). `SyncError`,
    having read nothing, when robots.txt or the start URL cannot be fetched (a network error
    or a 5xx: the site looks down, and nothing may be removed)."""
    crawl = _Crawl(scope=site_scope(root), fetcher=fetcher, owned=owned)
    _robots_read(crawl)
    crawl.enqueue(root, 0)
    for url in _sitemap_pages(crawl):
        crawl.enqueue(url, 1)
    for source, document in sorted(owned.items()):
        depth = (document.metadata or {}).get("depth", 1)
        crawl.enqueue(source, depth if isinstance(depth, int) else 1)
    first = True
    while crawl.queue:
        if fetcher.requests >= settings.SOURCE_MAX_PAGES:
            crawl.log(
                f"Page budget reached: {settings.SOURCE_MAX_PAGES} requests "
                f"(SOURCE_MAX_PAGES); {len(crawl.queue)} queued page(s) not fetched this run."
            )
            break
        if fetcher.out_of_time():
            crawl.log(
                f"Time budget reached: {settings.SOURCE_RUN_SECONDS:g} s (SOURCE_RUN_SECONDS); "
                f"{len(crawl.queue)} queued page(s) not fetched this run."
            )
            break
        url, depth = crawl.queue.popleft()
        _visit(crawl, url, depth, start=first)
        first = False
    if crawl.disallowed:
        crawl.log(f"{crawl.disallowed} page(s) left out: robots.txt disallows them.")
    if crawl.too_deep:
        crawl.log(
            f"Depth limit reached: {crawl.too_deep} link(s) more than "
            f"{settings.SOURCE_MAX_DEPTH} links from the start (SOURCE_MAX_DEPTH) not followed."
        )
    if crawl.duplicates:
        crawl.log(
            f"{crawl.duplicates} page(s) with the same content as another page at another URL "
            "not stored twice."
        )
    if crawl.wrong_type:
        crawl.log(f"{crawl.wrong_type} response(s) skipped: not what their type said.")
    return crawl.walk


def _robots_read(crawl: _Crawl) -> None:
    url = crawl.scope.origin + "/robots.txt"
    try:
        response = _follow(crawl, url, within=Scope(crawl.scope.origin, "/"), limit=_ROBOTS_BYTES)
    except FetchError as exc:
        raise SyncError(f"robots.txt of {crawl.scope.origin} could not be read: {exc}") from exc
    if response is None:
        return
    if response.status >= 500:
        raise SyncError(
            f"robots.txt of {crawl.scope.origin} answered {response.status}: the site looks "
            "down; nothing was changed."
        )
    if response.status != 200:
        return  # no robots.txt: everything may be fetched
    crawl.robots = Protego.parse(response.body.decode("utf-8", "replace"))
    delay = crawl.robots.crawl_delay(robots_agent())
    if delay:
        crawl.fetcher.min_interval = max(crawl.fetcher.min_interval, min(float(delay), 60.0))


def _sitemap_pages(crawl: _Crawl) -> list[str]:
    """The in-scope page URLs of the site's sitemaps (robots.txt's Sitemap lines and
    /sitemap.xml; sitemap indexes followed, at most `_MAX_SITEMAPS` read)."""
    listed = list(crawl.robots.sitemaps) if crawl.robots is not None else []
    candidates = deque([*listed, crawl.scope.origin + "/sitemap.xml"])
    seen: set[str] = set()
    pages: list[str] = []
    elsewhere = 0
    while candidates and len(seen) < _MAX_SITEMAPS:
        url = url_normalize(candidates.popleft())
        if url is None or url in seen:
            continue
        if not crawl.scope.same_host(url):
            elsewhere += 1
            continue
        seen.add(url)
        try:
            response = _follow(crawl, url, within=Scope(crawl.scope.origin, "/"))
        except FetchError as exc:
            crawl.log(f"Sitemap {url} not read: {exc}")
            continue
        if response is None or response.status != 200:
            continue
        try:
            tree = lxml.etree.fromstring(
                response.body,
                lxml.etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False),
            )
        except lxml.etree.XMLSyntaxError:
            crawl.log(f"Sitemap {url} is not XML; not read.")
            continue
        for loc in tree.iter("{*}loc"):
            target = url_normalize(loc.text or "")
            if target is None:
                continue
            if lxml.etree.QName(tree).localname == "sitemapindex":
                candidates.append(target)
            elif crawl.scope.holds(target):
                pages.append(target)
            elif not crawl.scope.same_host(target):
                elsewhere += 1
    if candidates:
        crawl.log(f"Sitemaps: only {_MAX_SITEMAPS} read; {len(candidates)} more not read.")
    if elsewhere:
        crawl.log(f"{elsewhere} sitemap URL(s) on another host ignored.")
    return pages


def _follow(crawl: _Crawl, url: str, *, within: Scope, headers=None, limit=None):
    """The response to GET `url`, redirects followed within `within` (at most `_MAX_HOPS`):
    None, and a log line, for a redirect leaving it or a loop."""
    chain = [url]
    for _hop in range(_MAX_HOPS + 1):
        if not crawl.allowed(url):
            crawl.disallowed += 1
            return None
        response = crawl.fetcher.request("GET", url, headers=headers, max_bytes=limit)
        if response.status not in _REDIRECTS:
            return response
        target = url_normalize(response.headers.get("location", ""), base=url)
        if target is None or not within.holds(target):
            crawl.log(f"{chain[0]} redirects out of scope (to {target or 'nowhere'}); skipped.")
            return None
        if target in chain:
            crawl.log(f"{chain[0]} redirects in a loop ({' -> '.join([*chain, target])}).")
            return None
        chain.append(target)
        url = target
    crawl.log(f"{chain[0]} redirects more than {_MAX_HOPS} times; skipped.")
    return None


def _visit(crawl: _Crawl, url: str, depth: int, *, start: bool) -> None:
    document = crawl.owned.get(url)
    headers = {}
    meta = (document.metadata or {}) if document is not None else {}
    if document is not None and is_current(document):
        if meta.get("etag"):
            headers["If-None-Match"] = meta["etag"]
        if meta.get("last_modified"):
            headers["If-Modified-Since"] = meta["last_modified"]
    if not crawl.allowed(url):
        crawl.disallowed += 1
        if document is not None:
            crawl.walk.gone.add(url)  # robots.txt now disallows it: it left the site's scope
        return
    try:
        response = _follow(crawl, url, within=crawl.scope, headers=headers)
    except FetchError as exc:
        if start and not exc.bound:
            raise SyncError(
                f"The start page could not be fetched: {exc} Nothing was changed."
            ) from exc
        if exc.bound:
            crawl.log(str(exc))
        else:
            crawl.walk.unreadable.append((url, str(exc)))
        return
    if response is None:  # redirected out of scope, or in a loop
        if document is not None:
            crawl.walk.unreadable.append((url, "Redirected out of scope or in a loop; kept."))
        return
    final = url_normalize(response.url) or url
    if final != url and document is not None:
        crawl.walk.gone.add(url)  # redirected within scope: the page now lives at `final`
    if response.status == 304 and document is not None:
        crawl.stored.add(url)
        crawl.walk.unchanged[url] = {"depth": min(depth, meta.get("depth", depth))}
        crawl.contents.add(document.content_hash)
        for link in meta.get("links", []):
            crawl.enqueue(link, depth + 1)
        return
    if response.status in _GONE:
        if start:
            crawl.log(f"The start page {url} answered {response.status}.")
        if document is not None:
            crawl.walk.gone.add(url)
        return
    if response.status != 200:
        if start and response.status in (401, 403):
            raise SyncError(
                f"The start page {url} answered {response.status}: the site refused us (check "
                "the source's credentials variable); nothing was changed."
            )
        if start and response.status >= 500:
            raise SyncError(
                f"The start page {url} answered {response.status}: the site looks down; "
                "nothing was changed."
            )
        if document is not None or start:
            crawl.walk.unreadable.append((url, f"Answered {response.status}; kept as it was."))
        return
    if final != url:
        crawl.queued.add(final)
        if final in crawl.stored:
            return
    _read(crawl, response, final, depth)


def _read(crawl: _Crawl, response: Response, url: str, depth: int) -> None:
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    validators = {
        "url": url,
        "etag": response.headers.get("etag", ""),
        "last_modified": response.headers.get("last-modified", ""),
        "depth": depth,
    }
    if media in _HTML_TYPES:
        _read_page(crawl, response, url, depth, validators)
        return
    name = document_name(url)
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in _SITE_FILE_TYPES:
        suffix = _SUFFIX_BY_TYPE.get(media, "")
        name = (PurePosixPath(name).stem or "download") + suffix
    if not suffix or (media not in _SUFFIX_BY_TYPE and media != "application/octet-stream"):
        crawl.walk.unsupported.append(url)
        return
    crawl.stored.add(url)
    crawl.walk.fetched.append(Fetched(url, name, response.body, metadata=validators))


def _read_page(crawl: _Crawl, response: Response, url: str, depth: int, validators: dict) -> None:
    body = response.body
    if b"\x00" in body[:4096]:
        crawl.wrong_type += 1
        crawl.log(f"{url} says it is HTML but holds binary data; skipped.")
        return
    try:
        tree = lxml.html.document_fromstring(body)
    except (lxml.etree.ParserError, ValueError):
        crawl.wrong_type += 1
        crawl.log(f"{url} says it is HTML but could not be read as HTML; skipped.")
        return
    key = url
    for href in tree.xpath("//link[@rel='canonical']/@href")[:1]:
        canonical = url_normalize(href, base=url)
        if canonical is not None and crawl.scope.holds(canonical) and crawl.allowed(canonical):
            key = canonical
    if key != url and url in crawl.owned:
        crawl.walk.gone.add(url)  # stored under its canonical URL from now on
    links: list[str] = []
    for href in tree.xpath("//a/@href | //area/@href"):
        link = url_normalize(href, base=url)
        if link is not None and crawl.scope.holds(link) and link not in links:
            links.append(link)
            crawl.enqueue(link, depth + 1)
    if key in crawl.stored:
        return  # a duplicate of a page already read this run
    crawl.stored.add(key)
    crawl.queued.add(key)
    text = body.decode(_charset(response), "replace")
    import trafilatura  # here, not at the top: every process loads this module (the admin)

    content = trafilatura.extract(
        text,
        output_format="html",
        include_formatting=True,
        include_tables=True,
        include_links=False,
        include_images=False,
        include_comments=False,
        favor_recall=True,
    )
    if not content:
        crawl.log(f"{key} has no main content to read; skipped.")
        if key in crawl.owned:
            crawl.walk.unreadable.append((key, "No main content found; kept as it was."))
        return
    data = content.encode("utf-8")
    digest = hashlib.sha256(data).hexdigest()
    if digest in crawl.contents and key not in crawl.owned:
        crawl.duplicates += 1  # /help/ and /help/index.html: one document
        return
    crawl.contents.add(digest)
    title = _page_title(text, tree) or None
    metadata = {**validators, "url": key, "links": links[:_LINKS_KEPT]}
    crawl.walk.fetched.append(Fetched(key, "page.html", data, title=title, metadata=metadata))


def _charset(response: Response) -> str:
    declared = response.headers.get("content-type", "")
    for part in declared.split(";")[1:]:
        name, _, value = part.strip().partition("=")
        if name.lower() == "charset" and value:
            try:
                "".encode(value.strip('"'))
                return value.strip('"')
            except LookupError:
                break
    return "utf-8"


def _page_title(text: str, tree) -> str:
    """The page's own title: trafilatura's (the <title> without the site's name), else the
    first <h1>."""
    import trafilatura

    metadata = trafilatura.extract_metadata(text)
    title = (metadata.title if metadata is not None else "") or ""
    if not title:
        found = tree.xpath("//h1")
        title = found[0].text_content() if found else ""
    return html.unescape(" ".join(title.split()))[:300]


def site_files_label() -> str:
    """The file types read from a site besides its pages ("pdf, docx, …")."""
    return ", ".join(sorted(suffix.lstrip(".") for suffix in _SITE_FILE_TYPES))
