"""How the suite empties the database after a transactional test."""

from __future__ import annotations

from django.core.management.color import no_style
from django.db import connections, transaction
from django.test import TransactionTestCase

_fixture_teardown_django = TransactionTestCase._fixture_teardown


def catalogue_tables() -> set[str]:
    """The tables migrating fills and the code only reads: the content types and the
    permissions."""
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    return {ContentType._meta.db_table, Permission._meta.db_table}


def fixture_teardown_keeping_catalogue(self: TransactionTestCase) -> None:
    """A transactional test's teardown: every table emptied in one TRUNCATE, as Django's
    `flush` does, except the content types and permissions, which are kept rather than
    emptied and written again by the `post_migrate` signal Django sends after it (why:
    docs/decisions/0170-the-suite-in-parallel-workers.md, eleventh round). A test case that
    names its `available_apps` or asks for a serialized rollback is torn down as Django does."""
    if self.available_apps is not None or self.serialized_rollback:
        _fixture_teardown_django(self)
        return
    kept = catalogue_tables()
    for db_name in self._databases_names(include_mirrors=False):
        connection = connections[db_name]
        tables = [
            table
            for table in connection.introspection.django_table_names(
                only_existing=True, include_views=False
            )
            if table not in kept
        ]
        statements = connection.ops.sql_flush(no_style(), tables)
        with transaction.atomic(using=db_name, savepoint=connection.features.can_rollback_ddl):
            connection.ops.execute_sql_flush(statements)


def teardown_install() -> None:
    """Tear transactional tests down with `fixture_teardown_keeping_catalogue`."""
    TransactionTestCase._fixture_teardown = fixture_teardown_keeping_catalogue
