"""Changes to collections and to which collection a document is in: create one, grant or
revoke reading, move documents (knowledge/access.py decides who reads what from them)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction

from knowledge.access import personal_files_filter
from knowledge.models import Collection, Document, collection_default_id


class CollectionError(ValueError):
    """A change to collections that cannot be made; the message says why, for the user."""


def collection_default() -> Collection:
    """The default collection ("General", readable by all staff), created when missing."""
    return Collection.objects.get(pk=collection_default_id())


def collection_create(
    *,
    name: str,
    description: str = "",
    groups: Iterable[Group] = (),
    users: Iterable[AbstractBaseUser] = (),
) -> Collection:
    """A new collection named `name` (surrounding spaces removed), readable by `groups` and
    `users`; with neither, readable by all staff.

    Raises CollectionError when the name is empty or another collection has it (names are
    compared ignoring case).
    """
    name = " ".join(name.split())
    if not name:
        raise CollectionError("A collection needs a name.")
    groups, users = list(groups), list(users)
    if Collection.objects.filter(name__iexact=name).exists():
        raise CollectionError(f"A collection named “{name}” already exists.")
    try:
        with transaction.atomic():
            collection = Collection.objects.create(
                name=name, description=description, all_staff=not groups and not users
            )
            collection.reader_groups.add(*groups)
            collection.reader_users.add(*users)
    except IntegrityError as exc:  # created meanwhile by another request
        raise CollectionError(f"A collection named “{name}” already exists.") from exc
    return collection


def collection_readers_grant(
    *,
    collection: Collection,
    groups: Iterable[Group] = (),
    users: Iterable[AbstractBaseUser] = (),
) -> None:
    """Let the members of `groups` and the `users` read `collection` (from their next
    request). Granting a reader who already reads it changes nothing."""
    collection.reader_groups.add(*groups)
    collection.reader_users.add(*users)


def collection_readers_revoke(
    *,
    collection: Collection,
    groups: Iterable[Group] = (),
    users: Iterable[AbstractBaseUser] = (),
) -> None:
    """Stop `groups` and `users` from being readers of `collection` (from their next request).

    Raises CollectionError, changing nothing, when one of them is not a reader of it. A user
    may still read it through a group, or because it is readable by all staff.
    """
    groups, users = list(groups), list(users)
    group_ids = set(collection.reader_groups.values_list("pk", flat=True))
    user_ids = set(collection.reader_users.values_list("pk", flat=True))
    for group in groups:
        if group.pk not in group_ids:
            raise CollectionError(f"The group “{group.name}” is not a reader of “{collection}”.")
    for user in users:
        if user.pk not in user_ids:
            raise CollectionError(
                f"The user “{user.get_username()}” is not a reader of “{collection}”."
            )
    with transaction.atomic():
        collection.reader_groups.remove(*groups)
        collection.reader_users.remove(*users)


def documents_move(*, ids: Sequence[int], collection: Collection) -> int:
    """Put the documents `ids` in `collection`; their readers change from the next request.
    Returns how many documents changed collection (those already in it are not counted). The
    documents' `updated_at` is left alone: it orders answers by recency, and the text did not
    change. Personal files are never moved: they stay in the hidden personal collection."""
    return (
        Document.objects.filter(pk__in=list(ids))
        .exclude(personal_files_filter())
        .exclude(collection=collection)
        .update(collection=collection)
    )
