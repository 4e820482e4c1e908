"""Who may read which document: the one rule every surface asks
(docs/decisions/0070-the-one-read-rule.md).

- An active superuser reads every document.
- Active staff read the documents of the collections they may read: a collection readable by
  all staff, one of whose reader groups they belong to, or one that names them as a reader
  user. Of those, staff who manage documents (`knowledge.view_document` or
  `knowledge.change_document`) read every document, withdrawn ones included (disabled,
  expired, not processed); everyone else only the available ones: enabled, ready and not
  expired (the documents retrieval searches).
- Anyone else (anonymous, inactive, not staff) reads nothing.

The rule comes in four forms, all computed from the same `Reader`:

- `reader_for(user)`: a request's `Reader`, computed once (two queries) and passed down. Every
  function below takes either a user or a `Reader` as `user`.
- `documents_readable_filter(user=..., prefix=...)`: a `Q` for a queryset of documents or of
  rows reaching a document (`prefix="document__"` for chunks, `"chunk__document__"` for
  embeddings); `documents_readable(user=...)` is that queryset of documents.
- `readable_documents_sql(user=..., document_id=...)`: the same filter as an SQL condition
  with its parameters, for raw SQL (the condition Django's compiler makes of the `Q`).
- `document_readable(user=..., document=...)`: the predicate for one document in hand.

Nothing is kept between calls: a `Reader` lives as long as the request that computed it, so
removing a user from a group, changing a collection's readers or moving a document is seen by
their next request.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, Permission
from django.core.exceptions import EmptyResultSet
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from knowledge.models import Collection, Document

# Either permission lets a member of staff see documents in the admin, withdrawn ones included.
MANAGE_PERMISSIONS = ("view_document", "change_document")


@dataclass(frozen=True)
class Reader:
    """What one request may read, computed by `reader_for` at the start of the request.

    `collection_ids` are the collections the reader may read (empty for a superuser, who reads
    every collection, and for anyone who reads nothing). `can_manage`: also reads the withdrawn
    documents of those collections.
    """

    user_id: int | None
    is_superuser: bool = False
    can_manage: bool = False
    collection_ids: frozenset[int] = frozenset()

    @property
    def reads_nothing(self) -> bool:
        return not self.is_superuser and not self.collection_ids


NOBODY = Reader(user_id=None)

UserLike = AbstractBaseUser | AnonymousUser | Reader | None


def _collections_readable_filter(user_id: int) -> Q:
    through_groups = Collection.reader_groups.through
    through_users = Collection.reader_users.through
    return (
        Q(all_staff=True)
        | Exists(
            through_groups.objects.filter(collection_id=OuterRef("pk"), group__user__id=user_id)
        )
        | Exists(through_users.objects.filter(collection_id=OuterRef("pk"), user_id=user_id))
    )


def reader_for(user: UserLike) -> Reader:
    """The `Reader` of `user` (returned as is when it already is one).

    The user's flags (active, staff, superuser) and document permissions are read from the
    database, not from the object: a WebSocket's user object lives as long as its connection.
    Two queries for staff, one for other signed-in users, none for anonymous visitors.
    """
    if isinstance(user, Reader):
        return user
    if user is None or not user.is_authenticated or user.pk is None:
        return NOBODY
    knowledge_permissions = Permission.objects.filter(
        content_type__app_label="knowledge", codename__in=MANAGE_PERMISSIONS
    )
    row = (
        get_user_model()
        .objects.filter(pk=user.pk)
        .annotate(
            manages_directly=Exists(knowledge_permissions.filter(user=OuterRef("pk"))),
            manages_by_group=Exists(knowledge_permissions.filter(group__user=OuterRef("pk"))),
        )
        .values("is_active", "is_staff", "is_superuser", "manages_directly", "manages_by_group")
        .first()
    )
    if row is None or not row["is_active"]:
        return NOBODY
    if row["is_superuser"]:
        return Reader(user_id=user.pk, is_superuser=True, can_manage=True)
    if not row["is_staff"]:
        return NOBODY
    collection_ids = Collection.objects.filter(_collections_readable_filter(user.pk)).values_list(
        "pk", flat=True
    )
    return Reader(
        user_id=user.pk,
        can_manage=row["manages_directly"] or row["manages_by_group"],
        collection_ids=frozenset(collection_ids),
    )


def user_manages_documents(user: UserLike) -> bool:
    """Whether `user` reads withdrawn documents too (of the collections they may read): an
    active superuser, or active staff with `knowledge.view_document` or
    `knowledge.change_document`."""
    return reader_for(user).can_manage


def documents_available_filter(prefix: str = "") -> Q:
    """Documents (through `prefix`) that are not withdrawn: enabled, ready and not expired at
    this moment; the documents retrieval searches."""
    return Q(**{f"{prefix}enabled": True, f"{prefix}status": Document.Status.READY}) & (
        Q(**{f"{prefix}expires_at__isnull": True})
        | Q(**{f"{prefix}expires_at__gt": timezone.now()})
    )


def document_is_available(document: Document) -> bool:
    """`documents_available_filter` for one document."""
    return document.enabled and document.status == Document.Status.READY and not document.is_expired


def documents_readable_filter(*, user: UserLike, prefix: str = "") -> Q:
    """The documents `user` may read, as a filter on the model reached through `prefix`
    ("" for documents, "document__" for chunks, "chunk__document__" for embeddings).

    Everything for a superuser (an empty `Q`); for anyone who reads nothing, a filter that
    matches nothing (Django skips the query, or raises EmptyResultSet when compiling it).
    """
    reader = reader_for(user)
    if reader.is_superuser:
        return Q()
    readable = Q(**{f"{prefix}collection_id__in": sorted(reader.collection_ids)})
    if reader.can_manage:
        return readable
    return readable & documents_available_filter(prefix)


def documents_readable(*, user: UserLike) -> QuerySet[Document]:
    """The documents `user` may read (unordered beyond the model's title order)."""
    return Document.objects.filter(documents_readable_filter(user=user))


def readable_documents_sql(*, user: UserLike, document_id: str = "document_id") -> tuple[str, list]:
    """`documents_readable_filter` as an SQL condition on the column `document_id` (a
    document's id, qualified as the caller's query needs, e.g. `"knowledge_chunk"."document_id"`)
    and its parameters, for raw SQL to put in its WHERE before it ranks.

    `"TRUE"` for a superuser, `"FALSE"` for anyone who reads nothing, else `<document_id> IN
    (SELECT id FROM knowledge_document WHERE …)`, the subquery compiled by Django from the
    same filter as the queryset (the parameters are its `%s` placeholders, in order).
    """
    reader = reader_for(user)
    if reader.is_superuser:
        return "TRUE", []
    queryset = Document.objects.filter(documents_readable_filter(user=reader)).order_by()
    try:
        sql, params = queryset.values("id").query.sql_with_params()
    except EmptyResultSet:
        return "FALSE", []
    return f"{document_id} IN ({sql})", list(params)


def document_readable(*, user: UserLike, document: Document) -> bool:
    """Whether `user` may read `document` (as loaded: the caller loads it in the same
    request)."""
    reader = reader_for(user)
    if reader.is_superuser:
        return True
    if document.collection_id not in reader.collection_ids:
        return False
    return reader.can_manage or document_is_available(document)


def collections_readable(*, user: UserLike) -> QuerySet[Collection]:
    """The collections `user` may read, by name: every one for a superuser."""
    reader = reader_for(user)
    if reader.is_superuser:
        return Collection.objects.all()
    return Collection.objects.filter(pk__in=sorted(reader.collection_ids))
