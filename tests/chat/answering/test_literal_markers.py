"""A document's own "[2]" (a footnote, a reference) is text: quoted in an answer it never
becomes a citation badge or a citation, on the page or for an API client; given to a language
model as part of a source, it cannot be mistaken for a source number either."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import sync_to_async

from chat import fragments, presenters
from chat.answering.grounding import source_entry
from chat.citations import quoted_markers_neutralize
from chat.models import Message
from chat.selectors import message_answer_with_citations
from tests.support.answers import collect
from tests.support.knowledge_base import document_create

pytestmark = pytest.mark.django_db(transaction=True)

QUESTION = "Where is the annex gateway code printed, and how often must the gateway code change?"
FOOTNOTE = "The annex gateway code is printed in footnote [2] of the annex binder."
API_MARKER = re.compile(r"\[(\d{1,3})\]")  # how a client reads markers (docs/product.md §5: "[n]")


async def test_a_bracketed_number_quoted_from_a_document_is_not_a_citation(staff_user):
    await sync_to_async(document_create)(title="Annex", texts=[FOOTNOTE])
    await sync_to_async(document_create)(
        title="Rotation",
        texts=["The gateway code must change every month, on the first working day."],
    )
    events = await collect(user=staff_user, question=QUESTION)
    answer_id = next(e.data["message_id"] for e in events if e.type == "answer_end")
    answer = await Message.objects.aget(pk=answer_id)
    assert "footnote [2\u2060] of the annex binder. [1]" in answer.content  # quoted, then cited
    assert await answer.citations.acount() == 2
    # An API client finds exactly the two markers the answer has, one per source.
    assert [int(n) for n in API_MARKER.findall(answer.content)] == [1, 2]
    streamed = "".join(e.data["text"] for e in events if e.type == "answer_delta")
    assert streamed == answer.content

    def rendered() -> str:
        message = message_answer_with_citations(answer.pk)
        view = presenters.message_views([message], user=staff_user, can_post=True)[0]
        return fragments.message_html(view)

    html = await sync_to_async(rendered)()
    assert html.count('class="cite-badge') == 2  # not 3: the footnote's "[2]" is no badge
    assert "footnote [2\u2060] of the annex" in html
    # Copied, the answer has no markers and the footnote reads as the document wrote it.
    copied = presenters.copy_text_of(answer.content)
    assert "footnote [2] of the annex binder." in copied
    assert "\u2060" not in copied and "[1]" not in copied


def test_a_source_given_to_the_model_has_no_marker_of_its_own():
    from types import SimpleNamespace

    chunk = SimpleNamespace(document_title="Annex", page=None, section="", text=FOOTNOTE)
    entry = source_entry(1, chunk)
    assert API_MARKER.findall(entry) == ["1"]  # only the source's own number
    assert quoted_markers_neutralize("see [1, 2] and [3]") == "see [1, 2\u2060] and [3\u2060]"
