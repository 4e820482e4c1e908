"""Markdown from a model, rendered and sanitised in one function (chat/markdown.py), and how
the UI picks it: a generative answer is Markdown, an extractive one plain escaped text."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from chat.markdown import markdown_html
from chat.models import Message
from chat.presenters import MessageView, SourceView

HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    '<a href="javascript:alert(1)">x</a>',
    '<a href="JaVaScRiPt:alert(1)" onclick="steal()">x</a>',
    "[x](javascript:alert(1))",
    "[x](  javascript:alert(1))",
    '<svg onload="alert(1)"><circle/></svg>',
    '<iframe src="https://evil.example"></iframe>',
    '<div style="background:url(javascript:alert(1))" onmouseover="alert(1)">hover</div>',
    "<object data=x></object><embed src=x>",
    '<a href="data:text/html;base64,PHNjcmlwdD4=">d</a>',
    "<form action=https://evil.example><input name=p></form>",
    '<p title="x" onfocus=alert(1) autofocus tabindex=1>p</p>',
    "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
    "![img](https://evil.example/t.png)",
    "<<script>script>alert(1)<</script>/script>",
]


def dom(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_markdown_loses_scripts_handlers_and_unsafe_links(text):
    html = markdown_html(f"Answer [1].\n\n{text}\n\nMore *text*.")
    soup = dom(html)
    assert soup.find(["script", "img", "svg", "iframe", "object", "embed", "form", "style"]) is None
    for tag in soup.find_all(True):
        assert not any(name.lower().startswith("on") for name in tag.attrs), tag
        assert "style" not in tag.attrs
        href = tag.get("href")
        if href is not None:
            assert href.split(":", 1)[0].lower() in {"http", "https", "mailto"} or ":" not in href
    assert html.startswith("<p>Answer [1].</p>")


def test_markdown_renders_formatting_lists_tables_and_safe_links():
    html = markdown_html(
        "**Leave**: 25 days [1].\n\n- one\n- two\n\n1. first\n\n| a | b |\n|---|---|\n| 1 | 2 |"
        "\n\n`code <b>`\n\n[site](https://intranet.example/a) and [mail](mailto:hr@example.org)"
    )
    soup = dom(html)
    assert soup.find("strong").text == "Leave"
    assert [li.text for li in soup.find("ul").find_all("li")] == ["one", "two"]
    assert soup.find("table").find("td").text == "1"
    assert soup.find("code").text == "code <b>"
    links = soup.find_all("a")
    assert [a["href"] for a in links] == ["https://intranet.example/a", "mailto:hr@example.org"]
    assert all(a["rel"] == ["nofollow", "noopener", "noreferrer"] for a in links)


def source(n: int) -> SourceView:
    return SourceView(n=n, title=f"Doc <{n}>", page=None, section=None, excerpt="e", text="t")


def test_a_generative_answer_is_rendered_markdown_with_badges_outside_code_and_links():
    view = MessageView(
        id="m1",
        role=Message.Role.ASSISTANT,
        mode=Message.Mode.GENERATIVE,
        content="**Yes** [1]. Not in code: `[1]`, nor [a link [1]](https://x.example). [9]",
        sources=[source(1)],
    )
    soup = dom(str(view.answer_html))
    assert soup.find("strong").text == "Yes"
    badges = soup.select(".cite-badge")
    assert len(badges) == 1 and badges[0]["href"] == "#src-m1-1"
    assert soup.find("code").text == "[1]"
    assert "Doc &lt;1&gt;" in str(view.answer_html)  # the title escaped in the badge's card
    assert "[9]" in soup.text  # naming no source: plain text


def test_an_extractive_answer_stays_plain_escaped_text():
    view = MessageView(
        id="m2",
        role=Message.Role.ASSISTANT,
        mode=Message.Mode.EXTRACTIVE,
        content="**Not bold** <b>x</b> [1]",
        sources=[source(1)],
    )
    html = str(view.answer_html)
    assert "<strong>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html and "**Not bold**" in html
    assert not view.is_markdown
