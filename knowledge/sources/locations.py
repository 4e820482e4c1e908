"""What a source's location names: its kind, its root as stored, its scope, its credentials.

Three spellings (docs/decisions/0160-sources-sites-and-webdav-shares.md):

- a folder: an absolute path (`/srv/shared/policies`), as before;
- a web site: its start URL, `http://` or `https://`; the pages under the start URL's path
  (the path up to its last `/`, so `https://host/help/` and `https://host/help/index.html`
  both scope to `/help/`);
- a WebDAV share: `webdavs://host/path/` (spoken over https) or `webdav://host/path/` (plain
  http); the files under that folder.
"""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass
from urllib.parse import SplitResult, quote, unquote, urljoin, urlsplit, urlunsplit

from knowledge.models import Source

_DEFAULT_PORTS = {"http": 80, "https": 443}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
_DAV_SCHEMES = {"webdav": "http", "webdavs": "https"}


class LocationError(ValueError):
    """A location that names no source we can sync; the message is meant for the operator."""


def source_kind(location: str) -> str:
    """`Source.Kind` of a location, by its spelling (a path is a folder)."""
    scheme = location.strip().split("://", 1)[0].lower() if "://" in location else ""
    if scheme in ("http", "https"):
        return Source.Kind.SITE
    if scheme in _DAV_SCHEMES:
        return Source.Kind.WEBDAV
    if scheme:
        raise LocationError(
            f"Unknown kind of source {scheme}://: give a folder path, an http(s):// start URL "
            "or a webdav(s):// share."
        )
    return Source.Kind.FOLDER


def url_normalize(url: str, *, base: str | None = None) -> str | None:
    """An http(s) URL in one spelling (lower-case scheme and host, no default port, no
    fragment, `/` for an empty path, the path's escapes made uniform), resolved against
    `base` when given; None for anything else (mailto:, javascript:, malformed)."""
    try:
        parts = urlsplit(urljoin(base, url.strip()) if base else url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    path = quote(unquote(parts.path or "/"), safe="/:@!$&'()*+,;=-._~%")
    return urlunsplit(SplitResult(scheme, host, path, parts.query, ""))


def url_origin(url: str) -> str:
    """scheme://host[:port] of a normalized URL."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass(frozen=True)
class Scope:
    """The URLs a site or share sync may request: its origin only, its path prefix only."""

    origin: str
    prefix: str  # ends with "/"

    def holds(self, url: str) -> bool:
        return url_origin(url) == self.origin and urlsplit(url).path.startswith(self.prefix)

    def same_host(self, url: str) -> bool:
        return url_origin(url) == self.origin


def site_root(location: str) -> str:
    """A site's start URL as stored (`url_normalize`), or `LocationError`."""
    root = url_normalize(location)
    if root is None or source_kind(location) != Source.Kind.SITE:
        raise LocationError(f"Not an http(s):// URL: {location}")
    return root


def site_scope(root: str) -> Scope:
    """The pages under the start URL's path: the path up to its last `/`."""
    path = urlsplit(root).path
    return Scope(origin=url_origin(root), prefix=path[: path.rfind("/") + 1] or "/")


def share_root(location: str) -> str:
    """A WebDAV share's location as stored: webdav(s)://host[:port]/path/ (a folder: ends
    with `/`), or `LocationError`."""
    raw = location.strip()
    scheme = raw.split("://", 1)[0].lower() if "://" in raw else ""
    if scheme not in _DAV_SCHEMES:
        raise LocationError(f"Not a webdav:// or webdavs:// location: {location}")
    http = url_normalize(_DAV_SCHEMES[scheme] + raw[len(scheme) :])
    if http is None:
        raise LocationError(f"Not a WebDAV location: {location}")
    parts = urlsplit(http)
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    netloc = parts.netloc
    return f"{scheme}://{netloc}{path}"


def share_http_url(root: str) -> str:
    """The http(s) URL a WebDAV location is spoken to."""
    scheme, rest = root.split("://", 1)
    return f"{_DAV_SCHEMES[scheme]}://{rest}"


def share_scope(root: str) -> Scope:
    url = share_http_url(root)
    return Scope(origin=url_origin(url), prefix=urlsplit(url).path)


def remote_root(location: str) -> str:
    """A site's or share's location as stored (its documents' `sync_root`)."""
    if source_kind(location) == Source.Kind.SITE:
        return site_root(location)
    return share_root(location)


def credentials_header(env_name: str) -> dict[str, str]:
    """The Authorization header for the credentials in the environment variable `env_name`
    (`user:password` for basic, `Bearer TOKEN` for a bearer token); {} when `env_name` is
    empty. `LocationError` when the variable is unset or not of either form. The value is
    never logged nor stored."""
    if not env_name:
        return {}
    if not _ENV_NAME.fullmatch(env_name):
        raise LocationError(f"Not an environment variable name: {env_name}")
    value = os.environ.get(env_name)
    if not value:
        raise LocationError(f"The environment variable {env_name} (the credentials) is not set.")
    if value.lower().startswith("bearer "):
        return {"Authorization": "Bearer " + value[7:].strip()}
    if ":" not in value:
        raise LocationError(
            f"The environment variable {env_name} must hold user:password or Bearer TOKEN."
        )
    return {"Authorization": "Basic " + base64.b64encode(value.encode()).decode("ascii")}


def credentials_env_clean(env_name: str, *, kind: str) -> str:
    """A source's credentials variable as stored: empty, or the name of a variable set in
    this server's environment (for a site or a share only); `LocationError` otherwise."""
    name = env_name.strip()
    if not name:
        return ""
    if kind == Source.Kind.FOLDER:
        raise LocationError("A folder takes no credentials: leave the variable empty.")
    credentials_header(name)
    return name


def location_clean(location: str, *, exclude_pk: int | None = None) -> tuple[str, str]:
    """(kind, location as stored) of a site or share source, or `LocationError`: not the
    location of another source, nor inside or around one's scope (a page or file is owned by
    one sync only). Folders are checked by `knowledge.services.sync.folder_path_clean`."""
    kind = source_kind(location)
    root = remote_root(location)
    scope = site_scope(root) if kind == Source.Kind.SITE else share_scope(root)
    others = Source.objects.exclude(pk=exclude_pk).exclude(kind=Source.Kind.FOLDER)
    for other_kind, other in others.values_list("kind", "location"):
        if other == root:
            raise LocationError(f"{root} is already a source.")
        other_scope = site_scope(other) if other_kind == Source.Kind.SITE else share_scope(other)
        if other_scope.origin == scope.origin and (
            other_scope.prefix.startswith(scope.prefix)
            or scope.prefix.startswith(other_scope.prefix)
        ):
            raise LocationError(f"{root} overlaps the source {other}.")
    return kind, root
