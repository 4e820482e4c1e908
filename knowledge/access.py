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
- A personal file (`Document.owner` set) is read by its owner only, in whatever state, and by
  nobody else: not superusers, not those who manage documents (its rows are in the hidden
  personal collection, which no one reads as a collection). Retrieval searches only the
  owner's files attached to the conversation being answered (`reader_searching`;
  docs/decisions/0081-personal-files.md).

The rule comes in four forms, all computed from the same `Reader`:

- `reader_for(user)`: a request's `Reader`, computed once (one query) and passed down. Every
  function below takes either a user or a `Reader` as `user`.
- `documents_readable_filter(user=..., prefix=...)`: a `Q` for a queryset of documents or of
  rows reaching a document (`prefix="document__"` for chunks, `"chunk__document__"` for
  embeddings); `documents_readable(user=...)` is that queryset of documents.
- `readable_document_row_sql(user=..., alias=...)` (on a document row the query joined),
  `rows_searchable_sql(reader=..., alias=...)` (on chunk or embedding rows, which carry
  copies of their document's collection and of when it is withdrawn, kept by the database)
  and `documents_searchable_sql(reader=..., alias=...)` (on the documents table): the same
  filter as an SQL condition with its parameters, for raw SQL (written out, not compiled
  from the `Q`: they run for every question; tests compare the forms).
- `document_readable(user=..., document=...)`: the predicate for one document in hand.

Nothing is kept between calls: a `Reader` lives as long as the request that computed it, so
removing a user from a group, changing a collection's readers or moving a document is seen by
their next request.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, replace

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser, Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.models import Q, QuerySet, Subquery
from django.utils import timezone

from knowledge.models import Collection, Document
from knowledge.sql_arrays import bigint_array, text_array
from knowledge.sql_prepared import cursor_prepared

# Either permission lets a member of staff see documents in the admin, withdrawn ones included.
MANAGE_PERMISSIONS = ("view_document", "change_document")


@dataclass(frozen=True)
class Reader:
    """What one request may read, computed by `reader_for` at the start of the request and
    passed down; a WebSocket computes one per message it handles, never once per connection.

    `collection_ids` are the collections the reader may read (empty for a superuser, who reads
    every collection, and for anyone who reads nothing). `can_manage`: also reads the withdrawn
    documents of those collections. `own_file_ids`: the reader's personal files (any state),
    which they alone read; `searched_file_ids`: those of them retrieval searches (the files
    attached to the conversation being answered, `reader_searching`; none by default).
    """

    user_id: int | None
    is_superuser: bool = False
    can_manage: bool = False
    collection_ids: frozenset[int] = frozenset()
    own_file_ids: frozenset[int] = frozenset()
    searched_file_ids: frozenset[int] = frozenset()
    # Someone else's personal file exists: only then can an answer be withheld from a
    # superuser (chat.withheld.messages_withheld), so only then does it cost them a query.
    others_files: bool = False

    @property
    def reads_nothing(self) -> bool:
        return not self.is_superuser and not self.collection_ids and not self.own_file_ids


NOBODY = Reader(user_id=None)

UserLike = AbstractBaseUser | AnonymousUser | Reader | None


@functools.cache
def _reader_sql() -> str:
    """One statement for a user's flags, whether they hold a document permission (directly or
    through a group), the collections they may read (all-staff ones, through a group, by
    name; never the hidden personal collection) and their personal files, for the permission
    codenames `%s` and the user id `%s`. Written by hand, not with the ORM
    (docs/decisions/0070-the-one-read-rule.md has the figures). The collections are read as
    three parts that each reach only their own rows (the all-staff ones from the partial index
    `collection_all_staff`, the user's groups' and the user's own grants by the user), never
    every collection of the deployment
    (docs/decisions/0178-the-reader-reads-its-own-collections.md)."""
    user_model = get_user_model()
    tables = {
        "user": user_model._meta.db_table,
        "user_groups": user_model.groups.through._meta.db_table,
        "user_permissions": user_model.user_permissions.through._meta.db_table,
        "group_permissions": Group.permissions.through._meta.db_table,
        "permission": Permission._meta.db_table,
        "content_type": ContentType._meta.db_table,
        "collection": Collection._meta.db_table,
        "collection_groups": Collection.reader_groups.through._meta.db_table,
        "collection_users": Collection.reader_users.through._meta.db_table,
        "document": Document._meta.db_table,
    }
    quoted = {key: connection.ops.quote_name(name) for key, name in tables.items()}
    return """
        SELECT u.is_active, u.is_staff, u.is_superuser,
          EXISTS (
            SELECT 1 FROM {permission} p JOIN {content_type} ct ON ct.id = p.content_type_id
            WHERE ct.app_label = 'knowledge' AND p.codename = ANY(%s::text[])
              AND (p.id IN (SELECT permission_id FROM {user_permissions} WHERE user_id = u.id)
                OR p.id IN (SELECT gp.permission_id FROM {group_permissions} gp
                            JOIN {user_groups} ug ON ug.group_id = gp.group_id
                            WHERE ug.user_id = u.id))
          ),
          ARRAY(
            SELECT c.id FROM {collection} c WHERE c.all_staff AND NOT c.is_personal
            UNION ALL
            SELECT cg.collection_id FROM {collection_groups} cg
              JOIN {user_groups} ug ON ug.group_id = cg.group_id
              WHERE ug.user_id = u.id
                AND cg.collection_id IS DISTINCT FROM ({personal})
            UNION ALL
            SELECT cu.collection_id FROM {collection_users} cu
              WHERE cu.user_id = u.id
                AND cu.collection_id IS DISTINCT FROM ({personal})
          ),
          ARRAY(SELECT id FROM {document} WHERE owner_id = u.id),
          EXISTS (SELECT 1 FROM {document} WHERE owner_id IS NOT NULL AND owner_id <> u.id)
        FROM {user} u WHERE u.id = %s
    """.format(**quoted, personal=_PERSONAL_COLLECTIONS_SQL)


def reader_for(user: UserLike) -> Reader:
    """The `Reader` of `user` (returned as is when it already is one).

    The user's flags (active, staff, superuser), document permissions and readable collections
    are read from the database in one query, not from the object: a WebSocket's user object
    lives as long as its connection. No query for anonymous visitors.
    """
    if isinstance(user, Reader):
        return user
    if user is None or not user.is_authenticated or user.pk is None:
        return NOBODY
    with cursor_prepared() as cursor:  # planned once per connection (0156)
        cursor.execute(_reader_sql(), [text_array(MANAGE_PERMISSIONS), user.pk])
        row = cursor.fetchone()
    if row is None:
        return NOBODY
    is_active, is_staff, is_superuser, can_manage, collection_ids, own_file_ids, others = row
    if not is_active:
        return NOBODY
    own = frozenset(own_file_ids)
    if is_superuser:
        return Reader(
            user_id=user.pk,
            is_superuser=True,
            can_manage=True,
            own_file_ids=own,
            others_files=others,
        )
    if not is_staff:
        return NOBODY
    return Reader(
        user_id=user.pk,
        can_manage=can_manage,
        collection_ids=frozenset(collection_ids),
        own_file_ids=own,
    )


def user_is_staff(user: AbstractBaseUser | AnonymousUser | None) -> bool:
    """Whether `user` may use Sourced at all (pages, API, sockets, insights): signed in,
    active and staff. The one staff check every surface asks; `reader_for` applies the same
    rule in its SQL."""
    return bool(
        user is not None
        and user.is_authenticated
        and getattr(user, "is_active", False)
        and getattr(user, "is_staff", False)
    )


def reader_searching(reader: Reader, *, file_ids: Iterable[int]) -> Reader:
    """`reader` whose searches also cover those of `file_ids` that are their own personal
    files (the files attached to the conversation being answered); anyone else's are
    ignored."""
    return replace(reader, searched_file_ids=frozenset(file_ids) & reader.own_file_ids)


def personal_files_filter(*, owner: UserLike | None = None, prefix: str = "") -> Q:
    """Documents (through `prefix`) that are personal files: anyone's, or `owner`'s only
    (a user or a Reader). Personal files are read by their owner alone, whatever else the
    rule says; `~personal_files_filter()` is the documents of collections."""
    if owner is None:
        return Q(**{f"{prefix}owner__isnull": False})
    owner_id = owner.user_id if isinstance(owner, Reader) else owner.pk
    if owner_id is None:
        return Q(pk__in=[])
    return Q(**{f"{prefix}owner_id": owner_id})


def document_is_personal(document: Document) -> bool:
    """Whether `document` is a personal file (read by its owner alone)."""
    return document.owner_id is not None


def documents_not_personal_sql(alias: str) -> str:
    """The SQL condition on a document row `alias` that it is not a personal file (for raw SQL
    that must never read them: `~personal_files_filter()`)."""
    return f"{alias}.owner_id IS NULL"


def user_manages_documents(user: UserLike) -> bool:
    """Whether `user` reads withdrawn documents too (of the collections they may read): an
    active superuser, or active staff with `knowledge.view_document` or
    `knowledge.change_document`."""
    return reader_for(user).can_manage


def documents_available_filter(prefix: str = "") -> Q:
    """Documents (through `prefix`) that are not withdrawn: enabled, ready and not expired at
    this moment; the documents retrieval searches.

    Through a prefix, the row's document is tested as not one of the withdrawn documents
    (`documents_withdrawn`: a hashed set of those withdrawn now, and of no other), so the
    query does not join the documents to test it
    (docs/decisions/0176-withdrawn-documents-read-alone.md). Chunk and embedding rows carry
    their own copy, which `rows_available_filter` tests instead."""
    if prefix:
        return ~Q(**{f"{prefix}id__in": _withdrawn_ids()})
    return Q(enabled=True, status=Document.Status.READY) & (
        Q(expires_at__isnull=True) | Q(expires_at__gt=timezone.now())
    )


def rows_available_filter() -> Q:
    """Chunks or embeddings of available documents (`documents_available_filter`), tested on
    the row's own copy of when its document is withdrawn (`withdrawn_at`, kept by the
    database), so a search neither joins the documents nor reads the withdrawn ones
    (docs/decisions/0179-the-row-knows-when-it-is-withdrawn.md)."""
    return Q(withdrawn_at__isnull=True) | Q(withdrawn_at__gt=timezone.now())


def documents_withdrawn() -> QuerySet[Document]:
    """The documents that are not available (`documents_available_filter`): disabled, not
    ready or expired."""
    return Document.objects.filter(pk__in=_withdrawn_ids())


def _withdrawn_ids() -> QuerySet:
    """The ids of `documents_withdrawn`, as a query reading those documents alone: the
    disabled or not ready from the partial index `document_withdrawn`, the expired from
    `document_expiry` up to this moment (a document expiring later is not read)."""
    flagged = Document.objects.filter(Q(enabled=False) | ~Q(status=Document.Status.READY))
    expired = Document.objects.filter(expires_at__lte=timezone.now())
    return flagged.order_by().values("pk").union(expired.order_by().values("pk"), all=True)


def document_is_available(document: Document) -> bool:
    """`documents_available_filter` for one document."""
    return document.enabled and document.status == Document.Status.READY and not document.is_expired


def _personal_collections() -> QuerySet[Collection]:
    return Collection.objects.filter(is_personal=True).values("pk")


def documents_readable_filter(
    *,
    user: UserLike,
    prefix: str = "",
    collection_field: str | None = None,
    searching: bool = False,
) -> Q:
    """The documents `user` may read, as a filter on the model reached through `prefix`
    ("" for documents, "document__" for chunks, "chunk__document__" for embeddings).

    `collection_field` names the field holding the document's collection, by default the
    document's own (`<prefix>collection_id`); chunks and embeddings carry a copy the database
    keeps equal to it (`collection_id`), their document's id (`document_id`) and when it is
    withdrawn (`withdrawn_at`), which retrieval tests on the row itself: with
    `collection_field`, availability is tested on that copy (`rows_available_filter`).

    A superuser reads every document but personal files (a test on the collection: not the
    hidden personal one). Personal files: the reader's own (`Reader.own_file_ids`). With
    `searching`, what retrieval searches of it: only the personal files it searches
    (`Reader.searched_file_ids`), and only available documents, whoever reads (withdrawn ones
    are never searched, even for those who manage them), availability tested once for all.
    For anyone who reads nothing, a filter that matches nothing (Django skips the query, or
    raises EmptyResultSet when compiling it).
    """
    reader = reader_for(user)
    field = collection_field or f"{prefix}collection_id"

    def available() -> Q:
        return rows_available_filter() if collection_field else documents_available_filter(prefix)

    if reader.is_superuser:
        organisation = ~Q(**{f"{field}__in": Subquery(_personal_collections())})
    else:
        organisation = Q(**{f"{field}__in": sorted(reader.collection_ids)})
        if not reader.can_manage and not searching:
            organisation &= available()
    files = reader.searched_file_ids if searching else reader.own_file_ids
    readable = organisation
    if files:
        document_field = "document_id" if collection_field else f"{prefix}id"
        readable = organisation | Q(**{f"{document_field}__in": sorted(files)})
    return readable & available() if searching else readable


def documents_readable(*, user: UserLike) -> QuerySet[Document]:
    """The documents `user` may read (unordered beyond the model's title order)."""
    return Document.objects.filter(documents_readable_filter(user=user))


def readable_document_row_sql(*, user: UserLike, alias: str) -> tuple[str, list]:
    """`documents_readable_filter` as an SQL condition on a document row the caller's query
    already joined (`alias`: the documents table's alias; all its columns NULL when the join
    found none), and its parameters, for raw SQL: true when that row exists and `user` may
    read it. `"FALSE"` for anyone who reads nothing. The conditions of
    `documents_readable_filter` written out, the collections and files as arrays, so the
    text is the same for every reader of a kind (`tests/knowledge/test_access_rule.py`
    checks both forms select the same documents). It tests the one row, so its work does not
    grow with the library (the withheld check runs it for every question:
    docs/decisions/0153-postgresql-per-statement.md)."""
    reader = reader_for(user)
    if reader.reads_nothing:
        return "FALSE", []
    organisation, params = _organisation_sql(
        reader,
        alias=alias,
        document_column="id",
        file_ids=reader.own_file_ids,
        available=not reader.can_manage,
    )
    return f"({alias}.id IS NOT NULL AND {organisation})", params


def rows_searchable_sql(*, reader: Reader, alias: str) -> tuple[str, list]:
    """`documents_readable_filter(searching=True)` on the rows of a chunk or embedding table
    (`alias`: its name or alias in the caller's query), which carry their document's
    collection (`collection_id`), id (`document_id`) and when it is withdrawn
    (`withdrawn_at`): an SQL condition and its parameters, for the retrieval queries, written
    out as `readable_document_row_sql` is (the same tests compare it with the `Q` form).
    Everything is tested on the row, so a scan neither joins the documents nor reads the
    withdrawn ones (docs/decisions/0179-the-row-knows-when-it-is-withdrawn.md). TypeError
    unless `reader` is a `Reader` (a search is told whose it is, never defaults to
    everything)."""
    organisation, params = _searched_organisation_sql(
        reader, alias=alias, document_column="document_id"
    )
    return (
        f"({organisation} AND ({alias}.withdrawn_at IS NULL OR {alias}.withdrawn_at > %s))",
        [*params, timezone.now()],
    )


def documents_searchable_sql(*, reader: Reader, alias: str) -> tuple[str, list]:
    """`rows_searchable_sql` on rows of the documents table itself (`alias`), their own state
    tested (enabled, ready, not expired). TypeError unless `reader` is a `Reader`."""
    organisation, params = _searched_organisation_sql(reader, alias=alias, document_column="id")
    return (
        f"({organisation} AND {_AVAILABLE_SQL.format(alias=alias)})",
        [*params, *_available_params()],
    )


def _searched_organisation_sql(
    reader: Reader, *, alias: str, document_column: str
) -> tuple[str, list]:
    """What `reader` searches of the rows `alias` (`_organisation_sql`: their collections, the
    files searched), availability left to the caller. TypeError unless `reader` is a
    `Reader`."""
    reader_required(reader)
    return _organisation_sql(
        reader,
        alias=alias,
        document_column=document_column,
        file_ids=reader.searched_file_ids,
        available=False,
    )


def reader_required(reader: object) -> Reader:
    """`reader` when it is a `Reader`; TypeError otherwise (a user, None: a search must be told
    whose it is, and never defaults to everything)."""
    if not isinstance(reader, Reader):
        raise TypeError(f"reader must be a knowledge.access.Reader, not {type(reader).__name__}")
    return reader


def _organisation_sql(
    reader: Reader, *, alias: str, document_column: str, file_ids: frozenset[int], available: bool
) -> tuple[str, list]:
    """The SQL form of `documents_readable_filter`'s readable part on the row `alias`: the
    collections `reader` reads (for a superuser, every one but the hidden personal one), only
    their available documents when `available`, or one of `file_ids` (in `document_column`)."""
    params: list = []
    if reader.is_superuser:
        organisation = f"NOT ({alias}.collection_id IN ({_PERSONAL_COLLECTIONS_SQL}))"
    else:
        organisation = f"{alias}.collection_id = ANY(%s::bigint[])"
        params.append(bigint_array(sorted(reader.collection_ids)))
        if available:
            organisation = f"({organisation} AND {_AVAILABLE_SQL.format(alias=alias)})"
            params += _available_params()
    if file_ids:
        organisation = f"({organisation} OR {alias}.{document_column} = ANY(%s::bigint[]))"
        params.append(bigint_array(sorted(file_ids)))
    return organisation, params


_PERSONAL_COLLECTIONS_SQL = f"SELECT U0.id FROM {Collection._meta.db_table} U0 WHERE U0.is_personal"  # noqa: S608
# `documents_available_filter()` on a document row `alias`: enabled, ready, not expired.
_AVAILABLE_SQL = (
    "({alias}.enabled AND {alias}.status = %s AND ({alias}.expires_at IS NULL "
    "OR ({alias}.expires_at > %s AND {alias}.expires_at IS NOT NULL)))"
)


def _available_params() -> list:
    return [str(Document.Status.READY), timezone.now()]


def document_readable(*, user: UserLike, document: Document) -> bool:
    """Whether `user` may read `document` (as loaded: the caller loads it in the same
    request)."""
    reader = reader_for(user)
    if document_is_personal(document):
        return reader.user_id is not None and document.pk in reader.own_file_ids
    if reader.is_superuser:
        return True
    if document.collection_id not in reader.collection_ids:
        return False
    return reader.can_manage or document_is_available(document)


def available_document_searched(
    reader: Reader, *, document_id: int, collection_id: int, in_personal_collection: bool
) -> bool:
    """Whether retrieval searches an available document (id, collection, whether that is the
    hidden personal collection) for `reader`: `documents_readable_filter(searching=True)` for
    one document known to be available, for indexes kept in memory that must ask the rule per
    request (chat/answering/named_index.py)."""
    if document_id in reader.searched_file_ids:
        return True
    return available_collection_searched(
        reader, collection_id=collection_id, is_personal=in_personal_collection
    )


def available_collection_searched(reader: Reader, *, collection_id: int, is_personal: bool) -> bool:
    """Whether retrieval searches the available documents of a collection (its id, whether it
    is the hidden personal collection) for `reader`, the files attached to the conversation
    (`searched_file_ids`) aside: `available_document_searched` for every document of the
    collection at once, for indexes kept in memory by collection."""
    if reader.is_superuser:
        return not is_personal
    return collection_id in reader.collection_ids


def collections_readable(*, user: UserLike) -> QuerySet[Collection]:
    """The collections `user` may read, by name: every one but the hidden personal collection
    for a superuser."""
    reader = reader_for(user)
    if reader.is_superuser:
        return Collection.objects.filter(is_personal=False)
    return Collection.objects.filter(pk__in=sorted(reader.collection_ids))


# The operator's tools (`manage.py search`, `evaluate`, `bench`, the knowledge base's own
# calibration) act for nobody in particular and search every available document; a request
# from a user always passes that user's `reader_for(user)` instead.
OPERATOR = Reader(user_id=None, is_superuser=True, can_manage=True)


def reader_of_all_staff() -> Reader:
    """What every member of staff reads: the available documents of the collections readable
    by all staff (one query). For statistics shared by every reader (the evidence check's
    calibration, the vocabulary a server builds at start-up), so that nothing only some
    readers may read shapes them (docs/decisions/0076-statistics-per-reader.md)."""
    ids = Collection.objects.filter(all_staff=True).values_list("pk", flat=True)
    return Reader(user_id=None, collection_ids=frozenset(ids))
