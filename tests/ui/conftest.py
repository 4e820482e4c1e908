"""Fixtures of the browser UI tests: staff logins and stored exchanges with citations."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from django.test import Client

from chat.models import Citation, Conversation, Message
from knowledge.models import Chunk
from tests.support.browser import CHROMIUM, CHROMIUM_ARGS


def exchange_create(
    conversation: Conversation,
    *,
    question: str,
    answer: str,
    cited: Sequence[Chunk] = (),
    status: str = Message.Status.COMPLETE,
    suggestions: Sequence[str] = (),
) -> tuple[Message, Message]:
    """A stored question and its answer citing `cited` as [1], [2], … in order."""
    asked = Message.objects.create(conversation=conversation, role="user", content=question)
    answered = Message.objects.create(
        conversation=conversation,
        role="assistant",
        content=answer,
        status=status,
        reply_to=asked,
        suggestions=list(suggestions),
    )
    for n, chunk in enumerate(cited, start=1):
        Citation.objects.create(
            message=answered,
            chunk=chunk,
            chunk_id_snapshot=chunk.pk,
            n=n,
            similarity=0.8,
            document_id_snapshot=chunk.document_id,
            document_title=chunk.document.title,
            page=chunk.page,
            section=chunk.section,
            url="",
            chunk_index=chunk.index,
            text=chunk.text,
            text_hash=hashlib.sha256(chunk.text.encode()).hexdigest(),
        )
    return asked, answered


@pytest.fixture
def staff_client(staff_user) -> Client:
    client = Client()
    client.force_login(staff_user)
    return client


@pytest.fixture
def other_client(other_staff_user) -> Client:
    client = Client()
    client.force_login(other_staff_user)
    return client


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium through Playwright, one per test module."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (`make browser`).")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread: let the ORM run beside it.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    playwright = sync_playwright().start()
    chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    try:
        yield chromium
    finally:
        chromium.close()
        playwright.stop()
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous
