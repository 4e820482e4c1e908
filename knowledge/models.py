"""Collections of documents, documents, their chunks and the chunks' embeddings."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.db.models.functions import Cast
from django.utils import timezone
from pgvector.django import BitField, HnswIndex, VectorField

EMBEDDING_DIMENSIONS = 384


class Collection(models.Model):
    """A set of documents and who may read them: all staff (`all_staff`), or only the
    `reader_groups` and `reader_users`. Every document belongs to exactly one collection;
    knowledge/access.py decides from it who reads the document."""

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    all_staff = models.BooleanField(
        "readable by all staff",
        default=False,
        help_text="Every staff member may read its documents. Untick it to restrict them to "
        "the reader groups and users below (kept, but without effect, while it is ticked).",
    )
    reader_groups = models.ManyToManyField(
        "auth.Group",
        blank=True,
        related_name="readable_collections",
        help_text="Members of these groups may read the collection's documents.",
    )
    reader_users = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="readable_collections",
        help_text="These users may read the collection's documents.",
    )
    is_default = models.BooleanField(
        default=False,
        editable=False,
        help_text='The collection new documents go to when none is named ("General").',
    )
    is_personal = models.BooleanField(
        default=False,
        editable=False,
        help_text="The hidden collection of users' personal files: nobody reads it as a "
        "collection; each file is read by its owner only "
        "(docs/decisions/0081-personal-files.md).",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    DEFAULT_NAME = "General"
    PERSONAL_NAME = "Personal files"

    class Meta:
        ordering = ["name", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"],
                condition=models.Q(is_default=True),
                name="collection_one_default",
            ),
            models.UniqueConstraint(
                fields=["is_personal"],
                condition=models.Q(is_personal=True),
                name="collection_one_personal",
            ),
        ]
        # The all-staff collections every Reader reads, without the others
        # (docs/decisions/0178-the-reader-reads-its-own-collections.md).
        indexes = [
            models.Index(
                fields=["id"],
                name="collection_all_staff",
                condition=models.Q(all_staff=True, is_personal=False),
            )
        ]

    def __str__(self) -> str:
        return self.name


def collection_default_id() -> int:
    """The primary key of the default collection ("General", readable by all staff), created
    when missing (a database emptied by a test's flush): `Document.collection`'s default, so
    that a document created without naming a collection lands there. One query; nothing is
    kept between calls (docs/decisions/0071-general-the-default-collection.md)."""
    collection = Collection.objects.filter(is_default=True).only("pk").first()
    if collection is None:
        collection, _ = Collection.objects.get_or_create(
            is_default=True, defaults={"name": Collection.DEFAULT_NAME, "all_staff": True}
        )
    return collection.pk


def collection_personal_id() -> int:
    """The primary key of the hidden collection personal files belong to, created when
    missing (readable by no one as a collection: its files are read by their owners,
    docs/decisions/0081-personal-files.md). One query when it exists."""
    collection = Collection.objects.filter(is_personal=True).only("pk").first()
    if collection is None:
        collection, _ = Collection.objects.get_or_create(
            is_personal=True, defaults={"name": Collection.PERSONAL_NAME, "all_staff": False}
        )
    return collection.pk


class Document(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        PROCESSING = "processing", "Processing"
        READY = "ready", "Ready"
        FAILED = "failed", "Failed"

    title = models.CharField(max_length=300)
    source = models.CharField(
        max_length=1000, unique=True, help_text="File name, path or URL the document came from."
    )
    media_type = models.CharField(max_length=100)
    content_hash = models.CharField(max_length=64, blank=True, help_text="sha256 of the bytes.")
    chunker_version = models.PositiveSmallIntegerField(
        default=1,
        help_text="knowledge.chunking.CHUNKER_VERSION the chunks were cut with; `manage.py "
        "reindex --stale` re-chunks documents cut with another.",
    )
    status = models.CharField(
        max_length=20, choices=Status.choices, default=Status.PENDING, db_index=True
    )
    error = models.TextField(
        blank=True,
        help_text="Why the last processing failed. A ready document whose re-processing failed "
        "keeps its last good version searchable and shows the error here.",
    )
    progress = models.CharField(
        max_length=200,
        blank=True,
        help_text='What processing is doing now, when it is slow ("OCR: page 3 of 10").',
    )
    reprocessing_since = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When re-processing of this ready document was queued or started (empty when "
        "none is under way). Its last good version stays searchable meanwhile.",
    )
    enabled = models.BooleanField(default=True, help_text="Disabled documents are never cited.")
    collection = models.ForeignKey(
        Collection,
        on_delete=models.PROTECT,
        default=collection_default_id,
        related_name="documents",
        help_text="Who may read the document is decided by its collection's readers.",
    )
    metadata = models.JSONField(default=dict, blank=True)
    file = models.FileField(upload_to="documents/%Y/%m/", blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="uploaded_documents",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="personal_files",
        editable=False,
        help_text="Set for a personal file: its only reader. Empty for the organisation's "
        "documents.",
    )
    size = models.PositiveBigIntegerField(default=0, help_text="Bytes of the uploaded file.")
    purged_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When a personal file's text, chunks, vectors and bytes were removed (it "
        "expired or its owner removed it); its row stays so answers citing it know whose it was.",
    )
    expires_at = models.DateTimeField(
        null=True,
        blank=True,
        db_index=True,
        help_text="From this moment the document is never cited; `manage.py purge_expired` "
        "deletes it. Empty: it never expires.",
    )
    sync_root = models.CharField(
        "synced from",
        max_length=1000,
        blank=True,
        default="",
        db_index=True,
        help_text="The folder, site or WebDAV share a sync mirrors the document from (`manage.py "
        "sync`, a source): the sync re-reads it when its file or page changes and deletes it "
        "when it leaves. Empty: uploaded or ingested otherwise; no sync ever touches it.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title", "id"]
        indexes = [
            models.Index(fields=["enabled", "status"]),
            # What `documents_withdrawn` reads (knowledge/access.py): the documents disabled or
            # not ready, and by their expiry the ones expired, never those expiring later
            # (docs/decisions/0176-withdrawn-documents-read-alone.md).
            models.Index(
                fields=["id"],
                name="document_withdrawn",
                condition=Q(enabled=False) | ~Q(status="ready"),
            ),
            models.Index(
                fields=["expires_at"],
                include=["id"],
                name="document_expiry",
                condition=Q(expires_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return self.title

    @property
    def is_reprocessing(self) -> bool:
        return self.reprocessing_since is not None

    @property
    def url(self) -> str:
        """The link to the original given in the document's metadata (`metadata["url"]`, e.g.
        an intranet page set in the admin), else "". Not the stored file: without a URL a
        citation links to the app's document page (`chat.citations.document_link`),
        which offers the file."""
        return self.metadata.get("url", "") if isinstance(self.metadata, dict) else ""

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()


def _row_collection(*, db_index: bool = True) -> models.ForeignKey:
    """A chunk's or embedding's copy of its document's collection, which retrieval filters on
    without reaching the document. The database keeps it equal to the document's (triggers
    of migration 0007; docs/decisions/0077-the-collection-on-every-searched-row.md): whatever
    is written here is replaced, so rows are created without it. `db_index`: whether the
    column has an index of its own (not when a wider index leads with it)."""
    return models.ForeignKey(
        Collection,
        on_delete=models.PROTECT,
        db_index=db_index,
        related_name="+",
        editable=False,
        help_text="Its document's collection, kept equal to it by the database.",
    )


def _row_withdrawn_at() -> models.DateTimeField:
    """A chunk's or embedding's copy of when its document is withdrawn from searches, which
    retrieval tests on the row instead of reading the withdrawn documents: none while the
    document is available with no expiry date, its expiry date, or 1970-01-01 while it is
    disabled or not ready. The database keeps it equal to the document's state (triggers of
    migration 0020; docs/decisions/0179-the-row-knows-when-it-is-withdrawn.md): whatever is
    written here is replaced, so rows are created without it."""
    return models.DateTimeField(
        null=True,
        editable=False,
        help_text="When its document is withdrawn from searches, kept by the database.",
    )


class Chunk(models.Model):
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="chunks")
    collection = _row_collection()
    withdrawn_at = _row_withdrawn_at()
    index = models.PositiveIntegerField(help_text="Order of the chunk in its document.")
    text = models.TextField()
    page = models.PositiveIntegerField(null=True, blank=True)
    section = models.CharField(max_length=1000, null=True, blank=True)
    # Spreadsheets: the sheet of the chunk's rows and the cells they cover ("A4:E6").
    sheet = models.CharField(max_length=255, null=True, blank=True)
    cells = models.CharField(max_length=40, null=True, blank=True)
    ocr_confidence = models.FloatField(
        null=True,
        blank=True,
        help_text="Read by OCR from a scanned page: the mean confidence of its words, 0-100.",
    )
    char_start = models.PositiveIntegerField(default=0)
    char_end = models.PositiveIntegerField(default=0)
    token_count = models.PositiveIntegerField(default=0)
    text_hash = models.CharField(max_length=64, db_index=True)
    # Stored in the row (storage MAIN, migration 0017), never out of line in the TOAST table,
    # where the lexical ranking would fetch it again for each term it scores
    # (docs/decisions/0172-the-search-vector-in-its-row.md).
    search_vector = models.GeneratedField(
        expression=SearchVector("text", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )

    class Meta:
        ordering = ["document_id", "index"]
        constraints = [
            models.UniqueConstraint(fields=["document", "index"], name="chunk_unique_index")
        ]
        indexes = [
            GinIndex(fields=["search_vector"], name="chunk_search_vector_gin"),
            # A document's newest chunk in one index probe: the vocabulary's fingerprint reads
            # it per document (knowledge/vocabulary.py `knowledge_base_fingerprint`).
            models.Index(fields=["document", "id"], name="chunk_document_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.index}"


class Embedding(models.Model):
    chunk = models.ForeignKey(Chunk, on_delete=models.CASCADE, related_name="embeddings")
    # Copies of the chunk's document and collection, kept equal to them by the database
    # (`_row_collection`): the k-NN filters on the row without reaching the chunk.
    document = models.ForeignKey(
        Document,
        on_delete=models.CASCADE,
        related_name="+",
        editable=False,
        help_text="Its chunk's document, kept equal to it by the database.",
    )
    collection = _row_collection(db_index=False)  # embedding_collection_bits leads with it
    withdrawn_at = _row_withdrawn_at()
    vector = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    # The vector's signs, a bit a dimension, computed by the database: the row-by-row search
    # shortlists on these, read from the `embedding_collection_bits` index alone
    # (docs/decisions/0078-a-shortlist-on-the-vectors-signs.md).
    vector_bits = models.GeneratedField(
        expression=Cast(
            models.Func("vector", function="binary_quantize"),
            BitField(length=EMBEDDING_DIMENSIONS),
        ),
        output_field=BitField(length=EMBEDDING_DIMENSIONS),
        db_persist=True,
    )
    model = models.CharField(max_length=200, help_text="Embedding model name and version.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["chunk", "model"], name="embedding_unique_chunk_model")
        ]
        indexes = [
            models.Index(
                fields=["collection"],
                include=["model", "document", "chunk", "vector_bits", "withdrawn_at"],
                name="embedding_collection_bits",
            ),
            HnswIndex(
                name="embedding_vector_hnsw",
                fields=["vector"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            models.Index(fields=["model"], name="embedding_model_idx"),
        ]

    def __str__(self) -> str:
        return f"embedding of chunk {self.chunk_id} ({self.model})"


class SentenceVector(models.Model):
    """The embedding of one sentence (or spreadsheet row) an answer may quote
    (knowledge.sentences.answerable_sentences of a chunk), computed at ingestion so that
    answering embeds only the question. Keyed by the sentence's text hash and the model: a
    sentence repeated in many chunks or documents is stored once. Never searched by
    similarity (no vector index): read by hash for the chunks a question retrieved."""

    text_hash = models.CharField(max_length=64)
    model = models.CharField(max_length=200, help_text="Embedding model name and version.")
    vector = VectorField(dimensions=EMBEDDING_DIMENSIONS)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["text_hash", "model"], name="sentencevector_unique_hash_model"
            )
        ]

    def __str__(self) -> str:
        return f"sentence vector {self.text_hash[:12]} ({self.model})"


class Source(models.Model):
    """A place the ingestion worker mirrors into the knowledge base every `interval_minutes`:
    a folder of the worker's machine (knowledge/services/sync.py), a web site from its start
    URL (knowledge/sources/web.py) or a WebDAV share (knowledge/sources/webdav.py). New files
    or pages are ingested into `collection`, changed ones re-read, documents of those that
    left deleted. `next_run_at` is when the next re-scan is due; a worker claims it by moving
    it forward (docs/decisions/0116-watched-folders-scheduled-by-the-worker.md,
    docs/decisions/0160-sources-sites-and-webdav-shares.md)."""

    class Kind(models.TextChoices):
        FOLDER = "folder", "Folder"
        SITE = "site", "Web site"
        WEBDAV = "webdav", "WebDAV share"

    kind = models.CharField(
        max_length=10,
        choices=Kind.choices,
        default=Kind.FOLDER,
        editable=False,
        help_text="Decided by the location: a path, an http(s):// URL or a webdav(s):// URL.",
    )
    location = models.CharField(
        max_length=1000,
        unique=True,
        help_text="An absolute folder path on the machine the ingestion worker runs on "
        "(walked recursively), a site's start URL (https://intranet.example.org/handbook/: "
        "the pages under its path), or a WebDAV folder as webdavs://host/path/ (https) or "
        "webdav://host/path/ (plain http).",
    )
    collection = models.ForeignKey(
        Collection,
        on_delete=models.PROTECT,
        default=collection_default_id,
        related_name="sources",
        help_text="New documents from the source are created in this collection; documents "
        "already synced keep theirs (move them from the document list).",
    )
    credentials_env = models.CharField(
        "credentials variable",
        max_length=100,
        blank=True,
        help_text="Sites and WebDAV shares: the name of an environment variable of the server "
        "holding the credentials, user:password (basic) or Bearer TOKEN. The credentials "
        "themselves are never stored.",
    )
    interval_minutes = models.PositiveIntegerField(
        "interval (minutes)",
        default=60,
        validators=[MinValueValidator(1), MaxValueValidator(7 * 24 * 60)],
        help_text="The worker re-scans the source this often.",
    )
    enabled = models.BooleanField(
        default=True, help_text="Untick to stop the re-scans (the documents stay)."
    )
    next_run_at = models.DateTimeField(
        default=timezone.now,
        db_index=True,
        help_text="When the worker re-scans the source next.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["location"]

    def __str__(self) -> str:
        return self.location


class SyncRun(models.Model):
    """One sync of a source (`manage.py sync` or a source's re-scan): when, what it did, what
    failed, and where it stopped at a bound (`log`). A run killed before its end stays
    `running` until the next run of the same source marks it `interrupted`."""

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        FINISHED = "finished", "Finished"
        FAILED = "failed", "Failed"
        INTERRUPTED = "interrupted", "Interrupted"

    root = models.CharField(
        max_length=1000, db_index=True, help_text="The folder, site or share synced."
    )
    source = models.ForeignKey(
        Source, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs"
    )
    trigger = models.CharField(max_length=20, help_text='"command" or "worker".')
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)
    added = models.PositiveIntegerField(default=0)
    updated = models.PositiveIntegerField(default=0)
    moved = models.PositiveIntegerField(default=0)
    removed = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    skipped = models.PositiveIntegerField(
        default=0, help_text="Files of unsupported types, and files the sync does not own."
    )
    errors = models.JSONField(
        default=list, blank=True, help_text="[path, message] of each file that failed."
    )
    message = models.TextField(blank=True, help_text="Why the whole run failed, if it did.")
    log = models.JSONField(
        default=list,
        blank=True,
        help_text="Lines about what a site or share sync left out: bounds reached (pages, "
        "depth, size, time), robots.txt, redirects out of scope, wrong content types.",
    )

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [models.Index(fields=["source", "-started_at"])]

    def __str__(self) -> str:
        return f"sync of {self.root} at {self.started_at:%Y-%m-%d %H:%M}"


class PersonalFile(Document):
    """Personal files as the admin lists them: metadata only (knowledge/admin/personal_files.py)."""

    class Meta:
        proxy = True
        verbose_name = "personal file"


class PersonalFileSettings(models.Model):
    """The single row of personal-file settings, edited in the admin; an empty value leaves
    the environment's (config/settings.py) in force."""

    ttl_hours = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(24 * 365)],
        verbose_name="Time to live (hours)",
        help_text="How long a personal file is kept after its upload before it is purged. "
        "Empty: the PERSONAL_FILE_TTL environment variable (24 hours unless set). Applies to "
        "files uploaded from now on.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "personal file settings"
        verbose_name_plural = "personal file settings"

    def __str__(self) -> str:
        return "Personal file settings"
