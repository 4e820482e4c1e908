"""Shared fixtures: real PostgreSQL (the embedded server's test database), the real model."""

from __future__ import annotations

import os

import pytest

# Tests so marked take seconds each: a browser, servers, a model, a large load.
LONG_MARKERS = ("slow", "browser")


def pytest_configure(config: pytest.Config) -> None:
    """Transactional tests keep the content types and permissions at teardown
    (tests/support/database.py)."""
    from tests.support.database import teardown_install

    teardown_install()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the order its workers are handed the files in (`make test` runs it
    with `--no-loadscope-reorder`, so the first test of each file sets it): the files of one
    long test (marked slow or browser) first, then the files by their number of tests, most
    first, as pytest-xdist orders them by default. Handed out last, one such file ran on alone
    for up to a minute at the end of a run while the other workers had nothing left
    (docs/decisions/0170, tenth round). A file's tests keep their order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    counts: dict[object, int] = {}
    long_files = set()
    for item in items:
        counts[item.path] = counts.get(item.path, 0) + 1
        if any(item.get_closest_marker(marker) for marker in LONG_MARKERS):
            long_files.add(item.path)
    alone = {path for path in long_files if counts[path] == 1}
    items.sort(key=lambda item: (item.path not in alone, -counts[item.path]))


@pytest.fixture(autouse=True)
def _vocabulary_fresh():
    """Each test searches with its own knowledge base's vocabulary. A process trusts its cached
    vocabulary for RECHECK_SECONDS (2 s) between fingerprint checks — fine for a server, whose
    knowledge base changes rarely — so a test starting within 2 s of another test's knowledge
    base would weight its terms (and pick a follow-up's context terms) by the old one's
    frequencies, and pass or fail with timing. The fingerprint is read again at the test's
    first search; the vocabulary is rebuilt only if the knowledge base changed. Likewise the
    counts of rows a reader may search, kept for ROWS_COUNT_SECONDS, are counted again, and the
    index of the documents' names (chat/answering/named_index.py) is checked again."""
    from chat.answering.named_index import names_index_forget
    from knowledge.vector_search import searchable_rows_forget
    from knowledge.vocabulary import vocabulary_recheck

    vocabulary_recheck()
    searchable_rows_forget()
    names_index_forget()


@pytest.fixture
def task_rows_of_this_test(db):
    """The task table as this test finds it emptied, inside its transaction (rolled back with
    it): rows that another module's live processes committed to this worker's database (the
    browser tests' ingestion worker and server, a document deleted in their clean-up queueing a
    recalibration) are not this test's, which counts only the tasks it queues."""
    from django_tasks_db.models import DBTaskResult

    DBTaskResult.objects.all().delete()


@pytest.fixture
def latest_schema_after():
    """Every app back at its latest migration after the test (a test of a data migration goes
    back before it: tests/support/migrations.py)."""
    from tests.support.migrations import migrate_to_latest

    yield
    migrate_to_latest()


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_user(
        username="staff", password="staff-pass-123", is_staff=True
    )


@pytest.fixture
def other_staff_user(django_user_model):
    return django_user_model.objects.create_user(
        username="other", password="other-pass-123", is_staff=True
    )


def _template_make() -> str:
    """A copy of the freshly migrated test database, for the throwaway databases of evaluate
    and bench (lab.evaluation.isolated): copied in a moment instead of migrated each time."""
    import os

    from django.db import connection

    from lab.evaluation.isolated import database_copy

    source = connection.settings_dict["NAME"]
    template = f"{source}_template"
    database_copy(source, template)
    connection.settings_dict["NAME"] = source
    os.environ["ISOLATED_DATABASE_TEMPLATE"] = template
    return template


def _template_drop(template: str) -> None:
    import os

    from django.db import connection

    os.environ.pop("ISOLATED_DATABASE_TEMPLATE", None)
    with connection._nodb_cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {connection.ops.quote_name(template)}")


@pytest.fixture(scope="session")
def django_db_setup(
    request: pytest.FixtureRequest,
    django_test_environment: None,
    django_db_blocker,
    django_db_keepdb: bool,
    django_db_createdb: bool,
    django_db_modify_db_settings: None,
):
    """The test database, whatever tests were selected.

    pytest-django's own fixture sets up only the databases the selected tests' `django_db`
    markers name. The live-server tests (browser, XSS, scale-out) reach the database through
    module fixtures and carry no such marker, so a run of only those (`pytest
    tests/ui/test_xss.py`, or a `-k` that selects them) left the connection on the
    developer's own database and wrote to it.
    """
    from django.test.utils import setup_databases, teardown_databases

    keepdb = django_db_keepdb and not django_db_createdb
    with django_db_blocker.unblock():
        databases = setup_databases(
            verbosity=request.config.option.verbose,
            interactive=False,
            aliases={"default"},
            keepdb=keepdb,
        )
        template = _template_make()
    yield
    with django_db_blocker.unblock():
        _template_drop(template)
    if not django_db_keepdb:
        with django_db_blocker.unblock():
            teardown_databases(databases, verbosity=request.config.option.verbose)
