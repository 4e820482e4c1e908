"""Daphne's requests leave multipart bodies to Django (docs/decisions/0081-personal-files.md).

Twisted's `http.Request` parses every multipart/form-data body itself, before daphne hands the
request to Django: an upload is parsed twice (held in memory once more), and a malformed body
is answered by Twisted with an empty 400 instead of the API's error envelope. Daphne never
reads what Twisted parsed, so `install()` turns that parsing off for daphne's requests.
"""

from __future__ import annotations


def install() -> None:
    """Make daphne's `WebRequest` skip Twisted's multipart parsing (idempotent)."""
    from daphne.http_protocol import WebRequest

    if getattr(WebRequest, "_sourced_no_form_parsing", False):
        return
    original = WebRequest.__init__

    def __init__(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        self._parsePOSTFormSubmission = False

    WebRequest.__init__ = __init__
    WebRequest._sourced_no_form_parsing = True
