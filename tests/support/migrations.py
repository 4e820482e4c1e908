"""The test database migrated back and forth, for the tests of a data migration: back to the
state before it, rows written there with that state's models, then forward again."""

from __future__ import annotations

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets: list[tuple[str, str]]) -> Apps:
    """Migrate the test database to `targets` (app, migration name) and return the models of
    that state (`apps.get_model`). Going back unapplies the later migrations of every app that
    depends on them: `migrate_to_latest` (or the `latest_schema_after` fixture) puts them back."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


def migrate_to_latest() -> None:
    """Migrate every app of the test database to its latest migration, which the rest of the
    suite needs."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())
