"""`manage.py collection create|list|grant|revoke`: collections of documents and their readers."""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count

from knowledge.collections import (
    CollectionError,
    collection_create,
    collection_readers_grant,
    collection_readers_revoke,
)
from knowledge.models import Collection


class Command(BaseCommand):
    help = (
        "Collections of documents and who may read them. `create NAME [--group G]... "
        "[--user U]...` (with no group and no user the collection is readable by all staff); "
        "`list`; `grant NAME (--group G | --user U)` and `revoke NAME (--group G | --user U)`. "
        "Readers change from their next request."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        create = actions.add_parser("create", help="Create a collection.")
        create.add_argument("name", help="The collection's name (unique).")
        create.add_argument(
            "--group",
            action="append",
            default=[],
            dest="groups",
            metavar="GROUP",
            help="A group whose members may read it (repeatable).",
        )
        create.add_argument(
            "--user",
            action="append",
            default=[],
            dest="users",
            metavar="USERNAME",
            help="A user who may read it (repeatable).",
        )
        create.add_argument("--description", default="", help="What the collection holds.")
        actions.add_parser("list", help="List the collections, their readers and documents.")
        for name, text in (
            ("grant", "Let a group or a user read a collection."),
            ("revoke", "Stop a group or a user from reading a collection."),
        ):
            action = actions.add_parser(name, help=text)
            action.add_argument("name", help="The collection's name.")
            reader = action.add_mutually_exclusive_group(required=True)
            reader.add_argument("--group", metavar="GROUP", help="The group.")
            reader.add_argument("--user", metavar="USERNAME", help="The user.")

    def handle(self, *args, action: str, **options) -> None:
        if action == "create":
            self._create(options)
        elif action == "list":
            self._list()
        else:
            self._change(action, options)

    def _create(self, options: dict) -> None:
        groups = [_group(name) for name in options["groups"]]
        users = [_user(name) for name in options["users"]]
        try:
            collection = collection_create(
                name=options["name"],
                description=options["description"],
                groups=groups,
                users=users,
            )
        except CollectionError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(f"Created “{collection}”, readable by {_readers(collection)}.")
        )

    def _list(self) -> None:
        collections = (
            Collection.objects.annotate(document_total=Count("documents"))
            .prefetch_related("reader_groups", "reader_users")
            .order_by("name", "id")
        )
        for collection in collections:
            default = " (default)" if collection.is_default else ""
            self.stdout.write(
                f"{collection.name}{default}: {collection.document_total} document(s), "
                f"readable by {_readers(collection)}"
            )

    def _change(self, action: str, options: dict) -> None:
        collection = Collection.objects.filter(name__iexact=options["name"].strip()).first()
        if collection is None:
            raise CommandError(f"No collection is named “{options['name']}”.")
        groups = [_group(options["group"])] if options["group"] else []
        users = [_user(options["user"])] if options["user"] else []
        change = collection_readers_grant if action == "grant" else collection_readers_revoke
        try:
            change(collection=collection, groups=groups, users=users)
        except CollectionError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            self.style.SUCCESS(f"“{collection}” is now readable by {_readers(collection)}.")
        )
        if collection.all_staff and action == "grant":
            self.stdout.write("It is readable by all staff, so this reader adds nobody for now.")


def _group(name: str) -> Group:
    group = Group.objects.filter(name=name).first()
    if group is None:
        raise CommandError(f"No group is named “{name}”.")
    return group


def _user(username: str):
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        raise CommandError(f"No user is named “{username}”.")
    return user


def _readers(collection: Collection) -> str:
    if collection.all_staff:
        return "all staff"
    groups = sorted(f"group {group.name}" for group in collection.reader_groups.all())
    users = sorted(f"user {user.get_username()}" for user in collection.reader_users.all())
    return ", ".join(groups + users) or "nobody but superusers"
