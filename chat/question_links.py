"""Whether a question link (`/c/new?q=...`) may send its question by itself: only when the
navigation came from this site or from an origin listed in QUESTION_LINK_ORIGINS
(docs/decisions/0125-a-question-in-a-link.md)."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings
from django.http import HttpRequest


def origin_of(url: str) -> str:
    """`scheme://host[:port]` of `url`, lower-cased; "" when it has none."""
    parts = urlsplit(url.strip())
    if not parts.scheme or not parts.netloc:
        return ""
    return f"{parts.scheme}://{parts.netloc}".lower()


def question_link_trusted(request: HttpRequest) -> bool:
    """Whether the browser says this request came from this site (`Sec-Fetch-Site:
    same-origin`) or from no site at all (`none`: typed, a bookmark, another application), or
    its `Referer` is from an origin listed in QUESTION_LINK_ORIGINS. A browser that sends no
    `Sec-Fetch-Site` is trusted only with a `Referer` from this origin or a listed one.
    Everything else — another site, a same-site origin not listed, a hidden referrer — is not."""
    fetch_site = request.headers.get("Sec-Fetch-Site", "").lower()
    if fetch_site in ("same-origin", "none"):
        return True
    referrer = origin_of(request.headers.get("Referer", ""))
    if not referrer:
        return False
    listed = {origin_of(origin) for origin in settings.QUESTION_LINK_ORIGINS}
    if referrer in listed:
        return True
    return not fetch_site and referrer == origin_of(request.build_absolute_uri("/"))
