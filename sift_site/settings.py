"""Settings for sift, read from the environment and nowhere else (README.md, "Configuration").

With no environment at all the service runs on an embedded SQLite database.
Every ``SIFT_*`` value is parsed by a typed reader that refuses malformed input.
"""

from __future__ import annotations

import os
import tempfile
from datetime import timedelta
from pathlib import Path

import dj_database_url

from sift_site.env import (
    env_bearer_token,
    env_bool,
    env_bytes,
    env_choice,
    env_duration,
    env_int,
    env_list,
    env_networks,
    env_ports,
    env_secret_key,
    env_str,
)
from sift_site.log_lines import FORMATS
from sift_site.logging_settings import logging_settings

BASE_DIR = Path(__file__).resolve().parent.parent

# --- Django ---------------------------------------------------------------------------------

# SECRET_KEY, else the key file (`make secret-key` writes var/secret_key), else start-up refuses,
# whatever DEBUG says: web, cluster and commands must share one key no one else knows.
SECRET_KEY = env_secret_key("SECRET_KEY", "SECRET_KEY_FILE", BASE_DIR, "var/secret_key")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1,[::1]")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_prometheus",
    "django_q",
    "axes",
    "ninja",
    "batch",
    "fetch",
]

MIDDLEWARE = [
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "doors.middleware.RequestSizeLimitMiddleware",
    "doors.middleware.JsonMethodNotAllowedMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
    "axes.middleware.AxesMiddleware",
    "doors.middleware.SyncChainMiddleware",
]

ROOT_URLCONF = "sift_site.urls"
WSGI_APPLICATION = "sift_site.wsgi.application"
ASGI_APPLICATION = "sift_site.asgi.application"

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

DATABASE_URL = env_str("DATABASE_URL", "")
if DATABASE_URL:
    _database = dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)
else:
    _database = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(BASE_DIR / "db.sqlite3"),
    }
if _database["ENGINE"] == "django.db.backends.sqlite3":
    # IMMEDIATE makes every transaction take the write lock at BEGIN, so the caps checked by a
    # submit are serialised on SQLite the way row locks serialise them on PostgreSQL.
    _database["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # A file, not memory, so that a qcluster subprocess in the end-to-end tests sees the same
    # database; one per process, so that parallel test runs never share it.
    _database["TEST"] = {"NAME": str(Path(tempfile.gettempdir()) / f"sift-test-{os.getpid()}.sqlite3")}
# The ASGI entry points (sift_site/asgi.py, sift_site/mcp_asgi.py) turn the pool on: there request
# code runs in threads that come and go with the requests in flight, and a connection kept per
# thread (conn_max_age) would be opened for each new thread and left behind. The pool keeps a few
# per process, hands them from request to request and checks each as it hands it out
# (docs/decisions.md).
SIFT_DATABASE_POOL = env_bool("SIFT_DATABASE_POOL", False)
SIFT_DATABASE_POOL_SIZE = env_int("SIFT_DATABASE_POOL_SIZE", 16, minimum=1)
if SIFT_DATABASE_POOL and _database["ENGINE"] == "django.db.backends.postgresql":
    _database["CONN_MAX_AGE"] = 0
    _database["OPTIONS"] = {
        **_database.get("OPTIONS", {}),
        "pool": {"min_size": 1, "max_size": SIFT_DATABASE_POOL_SIZE, "timeout": 10},
    }
DATABASES = {"default": _database}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    "doors.auth.StaffLoginThrottle",  # django-axes first: a locked-out login stops there
    "django.contrib.auth.backends.ModelBackend",
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
# gunicorn serves the admin's and the API docs' assets itself through WhiteNoise: no CDN, no nginx.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Serve straight from the apps too, so a server started without collectstatic still has its assets.
WHITENOISE_USE_FINDERS = True

# Requests over 128 KiB are refused with 413 before Django reads them, by Content-Length or while
# a chunked body is read (doors/middleware.py).
SIFT_MAX_REQUEST_BYTES = 128 * 1024
DATA_UPLOAD_MAX_MEMORY_SIZE = SIFT_MAX_REQUEST_BYTES
# A document sent to POST /v1/read (or, base64, to the MCP tool read) may be this large, enforced
# while the body streams in; such uploads in flight per web (or mcp) process, per caller and in
# all (doors/middleware.py). An uploaded file stays in memory, never on disk.
SIFT_UPLOAD_MAX_BYTES = env_bytes("SIFT_UPLOAD_MAX_BYTES", "20MiB")
SIFT_UPLOADS_PER_CALLER = env_int("SIFT_UPLOADS_PER_CALLER", 2, minimum=1)
SIFT_UPLOADS_TOTAL = env_int("SIFT_UPLOADS_TOTAL", 4, minimum=1)
FILE_UPLOAD_MAX_MEMORY_SIZE = SIFT_UPLOAD_MAX_BYTES
# A client must take each piece of an answer within this, or the answer is dropped and its
# connection closed: a client that never reads holds no memory, stream or share for longer.
SIFT_SEND_TIMEOUT = env_duration("SIFT_SEND_TIMEOUT", "30s", positive=True)

# Only a proxy that overwrites X-Forwarded-Proto makes the header true; without one a client
# could send it and pass for HTTPS (docs/operations.md).
SIFT_BEHIND_PROXY = env_bool("SIFT_BEHIND_PROXY", False)
if SIFT_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", not DEBUG)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", not DEBUG)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"

# --- the staff console's logins (docs/admin.md, django-axes) ----------------------------------

# A user name that failed this many logins from one address is locked out there for the lockout;
# locked by name and address together, so that one address behind a proxy cannot lock every
# staff member out, nor can one name be locked out from everywhere. A success clears the count.
SIFT_ADMIN_LOGIN_FAILURES = env_int("SIFT_ADMIN_LOGIN_FAILURES", 5, minimum=1)
SIFT_ADMIN_LOGIN_LOCKOUT = env_duration("SIFT_ADMIN_LOGIN_LOCKOUT", "15m", positive=True)
AXES_FAILURE_LIMIT = SIFT_ADMIN_LOGIN_FAILURES
AXES_COOLOFF_TIME = timedelta(seconds=SIFT_ADMIN_LOGIN_LOCKOUT)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_ONLY_ADMIN_SITE = True
# Failures are kept (AccessAttempt, one row per name and address); successful logins are not.
AXES_DISABLE_ACCESS_LOG = True

# --- sift: batch jobs (docs/api.md, docs/workers.md) -------------------------------------------

SIFT_BATCH_ENABLED = env_bool("SIFT_BATCH_ENABLED", True)
SIFT_BATCH_TTL = env_duration("SIFT_BATCH_TTL", "24h", positive=True)
SIFT_BATCH_TARGETS_PER_JOB = env_int("SIFT_BATCH_TARGETS_PER_JOB", 32, minimum=1)
SIFT_BATCH_JOBS_PER_CALLER = env_int("SIFT_BATCH_JOBS_PER_CALLER", 1, minimum=1)
SIFT_BATCH_JOBS_TOTAL = env_int("SIFT_BATCH_JOBS_TOTAL", 8, minimum=1)
# More than two concurrent targets is never allowed (docs/workers.md): clamp, don't refuse.
SIFT_BATCH_WORKERS = min(env_int("SIFT_BATCH_WORKERS", 1, minimum=1), 2)
SIFT_BATCH_MAX_BYTES = env_bytes("SIFT_BATCH_MAX_BYTES", "64MiB")
# Finished jobs kept per caller, newest first: failed jobs store no bytes, so the byte budget
# alone would let one caller grow the tables forever.
SIFT_BATCH_FINISHED_PER_CALLER = env_int("SIFT_BATCH_FINISHED_PER_CALLER", 100, minimum=1)
SIFT_BATCH_RETRY_WAIT = env_duration("SIFT_BATCH_RETRY_WAIT", "2s")
SIFT_BATCH_RETRY_FOR = env_duration("SIFT_BATCH_RETRY_FOR", "10m")
# GET /v1/batch/{id}?wait= holds a request thread. Per web process, at most this many waits per
# caller and in all; the rest answer at once, so one caller never holds many threads.
SIFT_BATCH_WAITS_PER_CALLER = env_int("SIFT_BATCH_WAITS_PER_CALLER", 2)
SIFT_BATCH_WAITS_TOTAL = env_int("SIFT_BATCH_WAITS_TOTAL", 4)
# A job whose results are too large to answer whole is written in pieces while its client reads;
# per web process, at most this many such reads per caller at once (one more answers 429).
SIFT_BATCH_READS_PER_CALLER = env_int("SIFT_BATCH_READS_PER_CALLER", 2, minimum=1)
# GET /v1/batch/{id}/events streams open at once in the deployment, per caller and in all; one more
# answers 429 busy. A quiet stream carries a comment this often (at most 15s, for proxies).
SIFT_BATCH_STREAMS_PER_CALLER = env_int("SIFT_BATCH_STREAMS_PER_CALLER", 8, minimum=1)
SIFT_BATCH_STREAMS_TOTAL = env_int("SIFT_BATCH_STREAMS_TOTAL", 256, minimum=1)
SIFT_BATCH_STREAM_KEEPALIVE = min(max(env_duration("SIFT_BATCH_STREAM_KEEPALIVE", "15s"), 0.1), 15.0)
# An open stream's row is renewed a third of this before it runs out; the streams of a web process
# that died stop counting this long after its last renewal.
SIFT_BATCH_STREAM_LEASE = max(env_duration("SIFT_BATCH_STREAM_LEASE", "30s"), 1.0)

# --- sift: change tracking and monitors (docs/api.md, "Changes" and "Monitors") ----------------

# A caller's last readings kept for changes: true, per caller, oldest evicted first; never shared.
# The bytes are one budget with the caller's monitors' changes.
SIFT_CHANGES_PER_CALLER = env_int("SIFT_CHANGES_PER_CALLER", 1000, minimum=1)
SIFT_CHANGES_BYTES_PER_CALLER = env_bytes("SIFT_CHANGES_BYTES_PER_CALLER", "64MiB")
# Monitors: per caller and in all; the shortest every a monitor may ask (tests shorten it).
SIFT_MONITORS_PER_CALLER = env_int("SIFT_MONITORS_PER_CALLER", 20, minimum=1)
SIFT_MONITORS_TOTAL = env_int("SIFT_MONITORS_TOTAL", 1000, minimum=1)
SIFT_MONITOR_MIN_EVERY = env_duration("SIFT_MONITOR_MIN_EVERY", "5m", positive=True)

# --- sift: the MCP process (docs/mcp.md) -------------------------------------------------------

# /mcp requests being served at once in the mcp process, per caller and in all, counted after the
# key is checked; one more answers 429 caller_busy or 503 server_busy with Retry-After.
SIFT_MCP_PER_CALLER = env_int("SIFT_MCP_PER_CALLER", 4, minimum=1)
SIFT_MCP_TOTAL = env_int("SIFT_MCP_TOTAL", 32, minimum=1)

# --- sift: webhooks when a job finishes (docs/webhooks.md) -------------------------------------

# A receiver that did not answer 2xx is tried again after this, doubling each time, until
# SIFT_WEBHOOK_RETRY_FOR has passed since the job finished; a last try comes at that mark.
SIFT_WEBHOOK_RETRY_WAIT = env_duration("SIFT_WEBHOOK_RETRY_WAIT", "5s")
SIFT_WEBHOOK_RETRY_FOR = env_duration("SIFT_WEBHOOK_RETRY_FOR", "1h")
# A submit's callback_url is checked by the fetch guard, which looks its host up: a lookup that has
# not answered within this is a 400 naming the field, and the request thread goes free.
SIFT_WEBHOOK_RESOLVE_TIMEOUT = env_duration("SIFT_WEBHOOK_RESOLVE_TIMEOUT", "2s", positive=True)
# Attempts in flight at once, deployment-wide: in all, per caller and per receiving host, so
# that a caller or host whose receivers never answer holds a few senders and not all of them.
SIFT_WEBHOOK_SENDING = env_int("SIFT_WEBHOOK_SENDING", 8, minimum=1)
SIFT_WEBHOOK_PER_CALLER = env_int("SIFT_WEBHOOK_PER_CALLER", 2, minimum=1)
SIFT_WEBHOOK_PER_HOST = env_int("SIFT_WEBHOOK_PER_HOST", 4, minimum=1)

# --- sift: fetch pipeline (docs/fetch-pipeline.md) ---------------------------------------------

SIFT_FETCH_SLOTS = env_int("SIFT_FETCH_SLOTS", 8, minimum=1)
SIFT_FETCH_TIMEOUT = env_duration("SIFT_FETCH_TIMEOUT", "30s", positive=True)
SIFT_FETCH_CONNECT_TIMEOUT = env_duration("SIFT_FETCH_CONNECT_TIMEOUT", "10s", positive=True)
SIFT_FETCH_MAX_BYTES = env_bytes("SIFT_FETCH_MAX_BYTES", "20MiB")
SIFT_FETCH_MAX_CHARS = env_int("SIFT_FETCH_MAX_CHARS", 400_000, minimum=1)
# A caller's fetch share: the fetch slots it holds at once across the deployment, and its /v1/fetch
# requests in flight in one web process (so one caller never holds every request thread). By
# default 3, but no more than the sandbox children a process has (one per core, at least 2:
# fetch/sandbox/pool.py), so that one caller's pages never outnumber the parsers that read them;
# above them, system check sift.W007 says what that costs (docs/fetch-pipeline.md).
SIFT_FETCH_PER_CALLER = env_int(
    "SIFT_FETCH_PER_CALLER", min(3, max(2, len(os.sched_getaffinity(0)))), minimum=1
)
SIFT_FETCH_ALLOW_CIDRS = env_networks("SIFT_FETCH_ALLOW_CIDRS")
# Refuse every address outside SIFT_FETCH_ALLOW_CIDRS, public ones too: tests, benchmarks and
# fuzzing set it so that nothing they fetch can leave the machine.
SIFT_FETCH_ONLY_ALLOWED = env_bool("SIFT_FETCH_ONLY_ALLOWED", False)
SIFT_FETCH_ALLOW_PORTS = env_ports("SIFT_FETCH_ALLOW_PORTS", "80,443,8080,8443")
# The least time between two requests to one host, deployment-wide; 0 is off (docs/politeness.md).
SIFT_FETCH_HOST_INTERVAL = env_duration("SIFT_FETCH_HOST_INTERVAL", "0s")
# A sandbox child (the limited process that parses HTML, PDF and JSON) idle this long is stopped,
# returning its memory; the one a web worker starts ahead of use stays (fetch/sandbox/pool.py).
SIFT_SANDBOX_IDLE = env_duration("SIFT_SANDBOX_IDLE", "5m", positive=True)
SIFT_CACHE_TTL = env_duration("SIFT_CACHE_TTL", "15m")
SIFT_CACHE_MAX_BYTES = env_bytes("SIFT_CACHE_MAX_BYTES", "256MiB")
# Rendering (docs/rendering.md): Debian's Chromium, renders at once deployment-wide, one render's
# deadline, and the most resident memory the browser's processes may hold before the render ends.
# The browser is Debian's headless shell (chromium-headless-shell: Chromium's headless-only build,
# leaner, docs/decisions.md) where it is installed, else Debian's full chromium. The shell's binary
# itself, not /usr/bin/chromium-headless-shell: that is a shell script that stays as its parent.
HEADLESS_SHELL = "/usr/lib/chromium/chromium-headless-shell"
FULL_CHROMIUM = "/usr/bin/chromium"
SIFT_RENDER_CHROMIUM = env_str(
    "SIFT_RENDER_CHROMIUM", HEADLESS_SHELL if os.access(HEADLESS_SHELL, os.X_OK) else FULL_CHROMIUM
)
SIFT_RENDER_SLOTS = env_int("SIFT_RENDER_SLOTS", 1, minimum=1)
SIFT_RENDER_TIMEOUT = env_duration("SIFT_RENDER_TIMEOUT", "20s", positive=True)
SIFT_RENDER_MAX_MEMORY = env_bytes("SIFT_RENDER_MAX_MEMORY", "1GiB")
# A render's subrequests (docs/rendering.md, "Subrequests"): how many the page may have fetched,
# their bodies' bytes together, and how many to one host at once (4 at once in all).
SIFT_RENDER_SUBREQUESTS = env_int("SIFT_RENDER_SUBREQUESTS", 300, minimum=1)
SIFT_RENDER_SUBREQUEST_BYTES = env_bytes("SIFT_RENDER_SUBREQUEST_BYTES", "64MiB")
SIFT_RENDER_PER_HOST = env_int("SIFT_RENDER_PER_HOST", 4, minimum=1)
# /v1/map and MCP's map (docs/mapping.md): the deadline of one whole map, every file included.
SIFT_MAP_TIMEOUT = env_duration("SIFT_MAP_TIMEOUT", "60s", positive=True)
# The one render process of the machine: its Unix socket, and how long it stays up without a render.
SIFT_RENDER_SOCKET = env_str("SIFT_RENDER_SOCKET", str(BASE_DIR / "var" / "render.sock"))
SIFT_RENDER_IDLE = env_duration("SIFT_RENDER_IDLE", "2m")
# Run the browser in a network namespace of its own where the platform allows (false: the
# fail-closed proxy alone).
SIFT_RENDER_NAMESPACE = env_bool("SIFT_RENDER_NAMESPACE", True)

# --- logging (docs/operations.md, "Logs") ------------------------------------------------------

# text: one human-readable line a record; json: one JSON object a line (sift_site/log_lines.py),
# also from the render process and the sandbox children, which are handed both values.
LOG_FORMAT = env_choice("LOG_FORMAT", "text", FORMATS)
LOG_LEVEL = env_choice("LOG_LEVEL", "info", ("debug", "info", "warning", "error", "critical")).upper()
# Django's dictConfig, then Python's warnings as log lines too (py.warnings), in the same format.
LOGGING_CONFIG = "sift_site.log_lines.configure"
LOGGING = logging_settings(LOG_FORMAT, LOG_LEVEL)

# --- the django-q2 cluster (docs/workers.md) ---------------------------------------------------

# Tests and benchmarks only, never production: the per-target work of batch jobs replaced by a
# function (Caller, Target) -> {"content", "meta"} of a module under tests/ or bench/ (anything
# else is refused). Unset, the fetch pipeline does the work (batch/pipeline_bridge.py). docs/workers.md.
SIFT_TEST_FETCH_FUNC = env_str("SIFT_TEST_FETCH_FUNC", "")
# Tests and benchmarks only, never production: the fetch guard's name lookups answered by a
# function (host, port) -> [address, ...] of a module under tests/ or bench/, for processes a
# test starts (gunicorn, the MCP server). Unset, the system's resolver (fetch/guard.py).
SIFT_TEST_RESOLVE_FUNC = env_str("SIFT_TEST_RESOLVE_FUNC", "")
# A claimed target belongs to its worker for this long; a worker that has not stored anything
# by then is presumed dead. It must outlast a whole fetch, the longest a rendered one: gate wait
# (5 s), the fetch deadline, a render and its crash retry (each 15 s to start, the render deadline,
# 8 s to stop), and the sandboxed extraction after it (a system check, sift.E001, says so at start-up).
SIFT_BATCH_CLAIM_LEASE = env_duration(
    "SIFT_BATCH_CLAIM_LEASE", f"{SIFT_FETCH_TIMEOUT + 2 * SIFT_RENDER_TIMEOUT + 90:.0f}s", positive=True
)
# A worker task drains targets for at most SIFT_BATCH_DRAIN_SECONDS, then hands over to a fresh
# task, so django-q2's ``timeout`` (which kills the worker) never lands in the middle of a fetch.
SIFT_BATCH_DRAIN_SECONDS = env_duration("SIFT_BATCH_DRAIN_SECONDS", "120s", positive=True)
_task_timeout = int(SIFT_BATCH_DRAIN_SECONDS + SIFT_BATCH_CLAIM_LEASE + 30)
Q_CLUSTER = {
    "name": "sift",
    "orm": "default",
    "workers": SIFT_BATCH_WORKERS,
    "timeout": _task_timeout,
    # Greater than timeout, or django-q2 would hand a task to a second worker while the first runs.
    "retry": _task_timeout + 60,
    "ack_failures": True,
    "catch_up": False,
    # django-q2's ORM broker looks for queued tasks this often when it found none: a submit's
    # drains start within it (docs/decisions.md, "Drains start through the stock ORM broker").
    "poll": 0.05,
    "save_limit": 200,
    "queue_limit": 4,
    "label": "Cluster tasks",
}

# --- metrics (docs/metrics.md) -----------------------------------------------------------------

# When set, a scrape of /metrics must send it as `Authorization: Bearer <token>`; empty, it is open.
SIFT_METRICS_TOKEN = env_bearer_token("SIFT_METRICS_TOKEN", min_length=16)

# prometheus_client reads this variable itself; with it set, every process (gunicorn and cluster
# workers) writes its counters to files there and /metrics adds them up. `make run` sets it.
SIFT_METRICS_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")
if SIFT_METRICS_DIR:
    # prometheus_client fails on the first metric if the directory is missing; settings load first.
    Path(SIFT_METRICS_DIR).mkdir(parents=True, exist_ok=True)
