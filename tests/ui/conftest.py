"""Fixtures of the browser UI tests: staff logins and Chromium."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.test import Client

from tests.support.browser import CHROMIUM, CHROMIUM_ARGS, Pages


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


@pytest.fixture(scope="module", autouse=True)
def _task_rows_committed_cleared(django_db_setup, django_db_blocker) -> Iterator[None]:
    """When a browser module ends (after its live server and ingestion worker have stopped and
    its clean-up has run), the task rows they committed to this worker's test database are
    deleted: a personal file's processing and purge, the recalibrations queued when the
    clean-up deleted documents. Left there, a later test on the worker that counts the tasks
    it queues would count them."""
    yield
    from django_tasks_db.models import DBTaskResult

    with django_db_blocker.unblock():
        DBTaskResult.objects.all().delete()


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium (its headless shell) through Playwright, one per test module."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium-headless-shell (`make browser`)."
        )
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


@pytest.fixture
def pages(browser, live) -> Iterator[Pages]:
    opened = Pages(browser=browser, live=live)
    yield opened
    opened.close()
    assert not opened.dialogs, f"a dialog opened: {opened.dialogs}"
    assert not opened.errors, f"script errors: {opened.errors}"


@pytest.fixture
def db_reads(django_db_blocker):
    """Database reads from a browser test's own thread (Playwright's sync API runs an event
    loop in it); the browser modules use it for every test."""
    with django_db_blocker.unblock():
        yield
