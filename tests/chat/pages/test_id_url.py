"""`{% id_url %}` gives the very URL `{% url %}` gives, for UUID and integer ids and their canonical
text, and for any other id falls back to `{% url %}` (chat/templatetags/chat_urls.py); a message's
sources link their documents through it."""

from __future__ import annotations

import uuid

import pytest
from django.template import Context, Template
from django.urls import NoReverseMatch, reverse, set_script_prefix
from django.urls.resolvers import URLResolver

from chat.templatetags.chat_urls import id_url


def _render(source: str, **context) -> str:
    return Template("{% load chat_urls %}" + source).render(Context(context))


def _outcome(function, name: str, pk: object) -> str:
    try:
        return function(name, pk)
    except NoReverseMatch:
        return "NoReverseMatch"


def _resolutions_counted(monkeypatch) -> list:
    """From now on in the test, each URL pattern resolution appended to the list returned."""
    resolved = []
    original = URLResolver._reverse_with_prefix

    def counted(self, lookup_view, _prefix, *args, **kwargs):
        resolved.append(lookup_view)
        return original(self, lookup_view, _prefix, *args, **kwargs)

    monkeypatch.setattr(URLResolver, "_reverse_with_prefix", counted)
    return resolved


def test_the_same_url_as_reverse_for_each_kind_of_id():
    conversation = uuid.uuid4()
    assert _render("{% id_url 'chat:conversation' pk %}", pk=conversation) == reverse(
        "chat:conversation", args=[conversation]
    )
    assert _render("{% id_url 'chat:conversation_delete' pk %}", pk=conversation) == reverse(
        "chat:conversation_delete", args=[conversation]
    )
    message = uuid.uuid4()
    assert _render("{% id_url 'chat:message_feedback' pk %}", pk=str(message)) == reverse(
        "chat:message_feedback", args=[message]
    )
    other = uuid.uuid4()  # the second id of a name: from the URL reversed once
    assert _render("{% id_url 'chat:conversation' pk %}", pk=other) == reverse(
        "chat:conversation", args=[other]
    )
    assert _render("{% id_url 'knowledge:document' pk %}", pk=42) == reverse(
        "knowledge:document", args=[42]
    )


def test_the_script_prefix_is_followed():
    conversation = uuid.uuid4()
    try:
        set_script_prefix("/sourced/")
        assert _render("{% id_url 'chat:conversation' pk %}", pk=conversation).startswith(
            "/sourced/"
        )
    finally:
        set_script_prefix("/")
    assert not _render("{% id_url 'chat:conversation' pk %}", pk=conversation).startswith(
        "/sourced/"
    )


def test_the_text_of_an_id_in_its_canonical_form_is_put_in_place():
    message = uuid.uuid4()
    for name, pk in (("chat:message_feedback", str(message)), ("knowledge:document_file", "42")):
        assert _render(f"{{% id_url '{name}' pk %}}", pk=pk) == reverse(name, args=[pk])
    # Any other text is reversed as given: the same URL, or the same error.
    for name, pk in (
        ("knowledge:document", "042"),
        ("chat:message_feedback", str(message).upper()),
        ("chat:message_feedback", message.hex),
        ("chat:conversation_delete", f" {message}"),
    ):
        assert _outcome(id_url, name, pk) == _outcome(lambda n, p: reverse(n, args=[p]), name, pk)
    with pytest.raises(NoReverseMatch):
        id_url("knowledge:document", str(message))
    with pytest.raises(NoReverseMatch):
        id_url("chat:message_feedback", "42")


def test_a_message_s_sources_resolve_no_url_pattern_once_their_names_have_been(monkeypatch):
    """A cited source links its document and file (`SourceView.document_url`, `file_url`), and
    each badge its document: with eight sources, the render resolves no URL pattern once each
    name has been resolved once."""
    from chat import fragments
    from chat.models import Message
    from chat.presenters import MessageView, SourceView

    sources = [
        SourceView(
            n=n,
            document_id=100 + n,
            title=f"Policy {n}",
            page=n,
            section=None,
            excerpt=f"Fact {n}.",
            text=f"Fact {n}.",
            chunk_id=1_000 + n,
            has_file=True,
            document_available=True,
        )
        for n in range(1, 9)
    ]
    view = MessageView(
        id=str(uuid.uuid4()),
        role=Message.Role.ASSISTANT,
        content=" ".join(f"Fact {n} [{n}]." for n in range(1, 9)),
        sources=sources,
    )
    fragments.message_html(view)  # each URL name resolved once
    resolved = _resolutions_counted(monkeypatch)
    html = fragments.message_html(view)
    assert resolved == []
    for n in range(1, 9):
        document = reverse("knowledge:document", args=[100 + n])
        assert f'href="{document}?chunk={1_000 + n}#chunk-{1_000 + n}"' in html
        assert f'href="{reverse("knowledge:document_file", args=[100 + n])}#page={n}"' in html


def test_a_citation_s_links_resolve_no_url_pattern_once_their_name_has_been(monkeypatch):
    """Each citation an answer stores (`document_link`) and each one an OpenAI or MCP client is
    sent (`passage_link`) links the document's page through `id_url`."""
    from chat.citations import document_link
    from chat.clients.answers import passage_link

    expected = [reverse("knowledge:document", args=[pk]) for pk in (8, 9)]
    document_link(7, "")  # the name resolved once
    resolved = _resolutions_counted(monkeypatch)
    links = [document_link(8, ""), passage_link({"document_id": 9, "chunk_id": None})]
    assert resolved == []
    assert links == expected
    assert document_link(8, "https://intranet.example/p") == "https://intranet.example/p"
