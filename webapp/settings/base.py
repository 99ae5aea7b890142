"""Settings shared by every deployment, driven by environment variables."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import dj_database_url

import envs
from webapp.settings.env import (
    default_var_dir,
    env_bool,
    env_float,
    env_int,
    env_list,
    env_path,
    env_str,
)

# Before anything imports openenv: its Gradio page is off in the lab's processes (envs/__init__.py).
envs.skip_openenv_web_ui()

# The folder that holds webapp/, worker/ and envs/: a clone's root, or site-packages when installed.
BASE_DIR = Path(__file__).resolve().parent.parent.parent
WEBAPP_DIR = BASE_DIR / "webapp"  # its pages (templates/) and scripts and styles (static/) ship inside
VAR_DIR = env_path("ENVLAB_VAR_DIR", default_var_dir(BASE_DIR))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = False
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "knox",
    "axes",
    "drf_spectacular",
    # Swagger UI's and ReDoc's files, served by the lab (/api/docs/, /api/redoc/): no CDN.
    "drf_spectacular_sidecar",
    "webapp.core",
    "webapp.accounts",
    "webapp.catalog",
    "webapp.runs",
    "webapp.evaluations",
    "webapp.rewards",
    "webapp.jobs",
    "webapp.workbench",
    "webapp.sweeps",
    "webapp.api",
    # Only for manage.py's worker commands (build_demo_model): see worker/apps.py.
    "worker",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Above everything that may query the database: its outage answers 503, not a traceback.
    "webapp.core.dbdown.DatabaseUnavailableMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: turns a locked-out login into its lockout response.
    "axes.middleware.AxesMiddleware",
]

AUTHENTICATION_BACKENDS = [
    # First: refuses a locked-out username/address pair before any password is checked.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

ROOT_URLCONF = "webapp.urls"
ASGI_APPLICATION = "webapp.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [WEBAPP_DIR / "templates"],
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

DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The web server, the worker and the telemetry flusher write concurrently: wait for
    # the lock instead of failing, and let readers proceed during writes.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator", "OPTIONS": {"min_length": 10}},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [WEBAPP_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")

CHANNEL_LAYERS: dict[str, dict[str, Any]] = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            # redis-py 8 sets a 5 s socket timeout by default; an idle consumer then
            # crashes and the browser's socket drops (see field notes).
            "hosts": [{"address": REDIS_URL, "socket_timeout": None}],
            "capacity": 1000,
            "expiry": 30,
        },
    }
}

# How many reverse proxies of the operator's stand in front of the web server, each appending
# the address it saw to X-Forwarded-For (0: none, the header is the client's own and ignored).
ENVLAB_TRUSTED_PROXIES = env_int("ENVLAB_TRUSTED_PROXIES", 0)
REST_FRAMEWORK: dict[str, Any] = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # Hashed at rest, expiring (REST_KNOX below), revocable by their user.
        "knox.auth.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # Throttles key on the client's address (webapp.accounts.addresses): X-Forwarded-For only
    # through the operator's own proxies, never as the client wrote it.
    "NUM_PROXIES": ENVLAB_TRUSTED_PROXIES,
    "DEFAULT_PARSER_CLASSES": [
        "webapp.core.parsers.EnvlabJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_THROTTLE_CLASSES": [
        "webapp.core.throttles.AnonRateThrottle",
        "webapp.core.throttles.UserRateThrottle",
        "webapp.core.throttles.ScopedRateThrottle",
    ],
    # Scoped rates apply to the views that name a `throttle_scope`: each of those calls
    # does network work (probes, session storms) or starts work (runs).
    "DEFAULT_THROTTLE_RATES": {
        "anon": env_str("ENVLAB_THROTTLE_ANON", "60/min"),
        "user": env_str("ENVLAB_THROTTLE_USER", "1200/min"),
        "login": env_str("ENVLAB_THROTTLE_LOGIN", "10/min"),
        "launch": env_str("ENVLAB_THROTTLE_LAUNCH", "20/min"),
        "register": env_str("ENVLAB_THROTTLE_REGISTER", "20/min"),
        "probe": env_str("ENVLAB_THROTTLE_PROBE", "30/min"),
        "capacity": env_str("ENVLAB_THROTTLE_CAPACITY", "4/min"),
    },
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "webapp.core.errors.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "envlab API",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema describes every endpoint: signed-in users only.
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # 3.1: JSON Schema 2020-12, the dialect of the pydantic run config published in it.
    "OAS_VERSION": "3.1.0",
    # /api/docs/ and /api/redoc/ load nothing from another host: the UIs' files come from
    # drf-spectacular-sidecar (static files), and Swagger UI's online validator is off.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SWAGGER_UI_SETTINGS": {"deepLinking": True, "validatorUrl": None},
    "ENUM_NAME_OVERRIDES": {
        "EnvironmentKindEnum": "webapp.catalog.models.Environment.Kind",
        "EnvironmentStatusEnum": "webapp.catalog.models.Environment.Status",
        "RunStatusEnum": "webapp.runs.models.Run.Status",
        "EvaluationStatusEnum": "webapp.evaluations.models.Evaluation.Status",
        "ChartAxisEnum": "webapp.runs.telemetry.layout.X_AXES",
        "JobStatusEnum": "webapp.jobs.models.Job.Status",
        "TraceRoleEnum": "webapp.evaluations.arena.apis.TRACE_ROLES",
    },
}
# knox's token model, named (it is swappable): accounts.TokenName refers to it.
KNOX_TOKEN_MODEL = "knox.AuthToken"
REST_KNOX = {
    "TOKEN_TTL": timedelta(hours=env_float("ENVLAB_TOKEN_TTL_HOURS", 24 * 30)),
    "AUTH_HEADER_PREFIX": "Token",
    "TOKEN_LIMIT_PER_USER": 50,
}
# Login lockout: 5 failures for one username from one address lock that pair for 15 minutes
# (the login page, the admin and POST /api/auth/token/ alike).
AXES_FAILURE_LIMIT = env_int("ENVLAB_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_float("ENVLAB_LOGIN_COOLOFF_MINUTES", 15))
# Per (username, address): behind proxies the address is the client's (ENVLAB_TRUSTED_PROXIES),
# so nobody's failures lock a username for everyone; spraying one password over many usernames
# from one address meets the per-address "login" throttle on every login path instead.
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_CLIENT_IP_CALLABLE = "webapp.accounts.addresses.client_address"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# Throttle counters live in Redis so that every web process counts the same requests.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "envlab",
        "OPTIONS": {"socket_timeout": 1, "socket_connect_timeout": 0.5},
    }
}
# Request bodies: the largest the API takes is a catalog snapshot of 5 MB, as a file or as a
# JSON string (escaping grows it; the snapshot views refuse over 6 MB with their own message).
# webapp.core.bodylimit refuses bodies over 7 MB before Django buffers them.
ENVLAB_MAX_REQUEST_BYTES = env_int("ENVLAB_MAX_REQUEST_BYTES", 7 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = ENVLAB_MAX_REQUEST_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = ENVLAB_MAX_REQUEST_BYTES

# Celery: one training per worker process, late acks, requeue when a worker is lost.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Longer than the longest run: a shorter timeout makes the broker hand the same run to
# a second worker while the first is still training.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("ENVLAB_VISIBILITY_TIMEOUT", 7 * 24 * 3600),
}
CELERY_TASK_ROUTES = {
    "worker.tasks.train_run": {"queue": "train"},
    # Loads models and plays whole episodes: a training worker's kind of work.
    "worker.tasks.evaluate": {"queue": "train"},
    "worker.tasks.*": {"queue": "default"},
}
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Celery would route stdout/stderr into logging, where our console handler writes back into
# the redirected stream and child-process logs vanish. The trainer prints nothing anyway.
CELERY_WORKER_REDIRECT_STDOUTS = False
# Stale runs, evaluations and jobs are swept by beat (CELERY_BEAT_SCHEDULE below, every 30 s,
# embedded in `make run`'s light worker) and by `manage.py sweep_runs`; reads never write.

# Where runs keep checkpoints and where demo models live.
RUNS_DIR = env_path("ENVLAB_RUNS_DIR", VAR_DIR / "runs")
MODELS_DIR = env_path("ENVLAB_MODELS_DIR", VAR_DIR / "models")

# A run whose worker has not renewed its heartbeat for this long is considered dead:
# a redelivered task may take it over, and the sweeper marks it interrupted.
ENVLAB_HEARTBEAT_SECONDS = env_float("ENVLAB_HEARTBEAT_SECONDS", 2.0)
ENVLAB_STALE_SECONDS = env_float("ENVLAB_STALE_SECONDS", 20.0)
ENVLAB_INTERRUPT_SECONDS = env_float("ENVLAB_INTERRUPT_SECONDS", 45.0)
# An external run (webapp/runs/external.py) that logged nothing for this long is interrupted by
# the same sweep: its script is gone (a notebook closed, a job killed) or lost the lab for good.
ENVLAB_EXTERNAL_STALE_SECONDS = env_float("ENVLAB_EXTERNAL_STALE_SECONDS", 3600.0)
# How often beat sweeps stale runs, evaluations and jobs. Shorter than ENVLAB_INTERRUPT_SECONDS:
# a sweep that finds its previous one more than 1.5 periods back knows the database (or beat)
# was away, and waits ENVLAB_INTERRUPT_SECONDS before it trusts a stale heartbeat again.
ENVLAB_SWEEP_SECONDS = env_float("ENVLAB_SWEEP_SECONDS", 30.0)
# A run of several training processes (worker/training/distributed.py) that has not stopped at a step
# end this long after a cancel is stopped by its worker.
ENVLAB_CANCEL_GRACE_SECONDS = env_float("ENVLAB_CANCEL_GRACE_SECONDS", 300.0)
# A worker whose heartbeat is older than this is not counted on to carry a GPU run at launch.
ENVLAB_WORKER_SEEN_SECONDS = env_float("ENVLAB_WORKER_SEEN_SECONDS", 300.0)
ENVLAB_PROBE_TIMEOUT = env_float("ENVLAB_PROBE_TIMEOUT", 5.0)
# Where Open Reward catalog names (Org/Env) are resolved; the key comes from a named variable.
ENVLAB_OPENREWARD_API_URL = env_str("ENVLAB_OPENREWARD_API_URL", "https://api.openreward.ai")
# How often the default-queue worker re-probes every registered environment (seconds).
ENVLAB_RECHECK_SECONDS = env_float("ENVLAB_RECHECK_SECONDS", 60.0)
# Re-probes at once in a recheck round; a round starts no probe after ENVLAB_RECHECK_SECONDS.
ENVLAB_RECHECK_CONCURRENCY = env_int("ENVLAB_RECHECK_CONCURRENCY", 8)
# Environments one user may register (each is re-probed every ENVLAB_RECHECK_SECONDS).
ENVLAB_MAX_ENVIRONMENTS_PER_USER = env_int("ENVLAB_MAX_ENVIRONMENTS_PER_USER", 50)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # axes logs every login attempt at INFO; its lockouts are warnings.
    "loggers": {"httpx": {"level": "WARNING"}, "urllib3": {"level": "WARNING"}, "axes": {"level": "WARNING"}},
}

# Run by `celery beat` (embedded with -B in the light worker that `make run` starts).
CELERY_BEAT_SCHEDULE = {
    # Expires like the others: a round that outlived its period is not followed by a backlog.
    "recheck-environments": {"task": "worker.tasks.recheck_environments", "schedule": ENVLAB_RECHECK_SECONDS,
                             "options": {"expires": ENVLAB_RECHECK_SECONDS}},
    "sweep-stale-runs": {"task": "worker.tasks.sweep_stale_runs", "schedule": ENVLAB_SWEEP_SECONDS},
    # Re-sends queued runs that no worker claimed (a launch while Redis was down, a lost message).
    "requeue-unclaimed-runs": {"task": "worker.tasks.requeue_unclaimed_runs", "schedule": 60.0,
                               "options": {"expires": 60.0}},
    # Restarts bundled environment servers whose process died. Expires unless picked up
    # promptly, so a busy worker does not find a backlog of identical checks.
    # Queues pending sweep members into quota slots freed by anything (a run's end queues them at
    # once; evaluations and jobs that end do not announce it).
    "release-sweeps": {"task": "worker.tasks.release_sweeps", "schedule": 15.0, "options": {"expires": 15.0}},
    "supervise-bundled": {"task": "worker.tasks.supervise_bundled", "schedule": 5.0,
                          "options": {"expires": 5.0}},
}

# --- security limits (see shared/docs/security-review.md) --------------------------------
# Outbound URLs (environment servers, vLLM servers): loopback and private ranges are refused
# unless listed here as CIDR networks; link-local and cloud metadata addresses always are.
# Production allows nothing until configured; local settings allow loopback.
ENVLAB_ALLOWED_ENV_NETWORKS = env_list("ENVLAB_ALLOWED_ENV_NETWORKS")
# HTTP(S)_PROXY and the like are ignored by the lab's outbound clients (the openreward SDK's
# sessions): through a proxy the outbound rules would check the proxy, not the server.
ENVLAB_TRUST_ENV_PROXIES = env_bool("ENVLAB_TRUST_ENV_PROXIES", False)
# One overall deadline per probe (registration, re-check), and a cap on any body read.
ENVLAB_PROBE_DEADLINE = env_float("ENVLAB_PROBE_DEADLINE", 10.0)
ENVLAB_MAX_RESPONSE_BYTES = env_int("ENVLAB_MAX_RESPONSE_BYTES", 4 * 1024 * 1024)
# Tool results and observations are cut to this many characters before they reach the
# model or the database.
ENVLAB_MAX_TOOL_TEXT = env_int("ENVLAB_MAX_TOOL_TEXT", 64 * 1024)
# Environment variables an Open Reward catalog registration may name for its API key
# (the key goes to ENVLAB_OPENREWARD_API_URL only).
# Fernet key for per-user secrets (webapp.accounts.secrets); production requires it.
ENVLAB_SECRETS_KEY = env_str("ENVLAB_SECRETS_KEY", "")
# Keys that only decrypt (what older values were stored under); a value read with one is
# stored again under ENVLAB_SECRETS_KEY. Comma-separated Fernet keys.
ENVLAB_SECRETS_PREVIOUS_KEYS = env_list("ENVLAB_SECRETS_PREVIOUS_KEYS", "")
ENVLAB_API_KEY_ENV_ALLOWED = env_list("ENVLAB_API_KEY_ENV_ALLOWED", "OPENREWARD_API_KEY")
# Container images: only from these registries (prefixes such as "ghcr.io/meta-pytorch/");
# empty refuses every image.
ENVLAB_IMAGE_REGISTRIES = env_list("ENVLAB_IMAGE_REGISTRIES")
# Try-it console sockets one user may hold open at once.
ENVLAB_CONSOLE_MAX_SOCKETS = env_int("ENVLAB_CONSOLE_MAX_SOCKETS", 4)
# Queued + running runs one user may have at once.
ENVLAB_MAX_ACTIVE_RUNS = env_int("ENVLAB_MAX_ACTIVE_RUNS", 4)
# Queued + running runs, evaluations and background jobs one user may have at once, together.
ENVLAB_MAX_ACTIVE_WORK = env_int("ENVLAB_MAX_ACTIVE_WORK", 8)
# A stored rollout's or evaluation episode's messages, as JSON: past it the head and the tail
# are kept with a note of the cut (webapp/core/transcripts.py).
ENVLAB_MAX_EPISODE_BYTES = env_int("ENVLAB_MAX_EPISODE_BYTES", 1024 * 1024)
# Local model folders are accepted only under MODELS_DIR and these roots.
ENVLAB_MODEL_ROOTS = env_list("ENVLAB_MODEL_ROOTS")
# A queued run that no worker claimed for this long is sent again by beat.
ENVLAB_REQUEUE_SECONDS = env_float("ENVLAB_REQUEUE_SECONDS", 180.0)
# A worker that could not write telemetry for this long fails its run (no unbounded memory).
ENVLAB_TELEMETRY_OUTAGE_SECONDS = env_float("ENVLAB_TELEMETRY_OUTAGE_SECONDS", 600.0)
ENVLAB_TELEMETRY_MAX_PENDING = env_int("ENVLAB_TELEMETRY_MAX_PENDING", 5000)
# An environment server out of reach for less than this is waited for (resets retried with
# backoff, its episodes lost meanwhile stored unscored); past it the run stops, interrupted
# and resumable (envs/adapters/outage.py).
ENVLAB_ENV_OUTAGE_SECONDS = env_float("ENVLAB_ENV_OUTAGE_SECONDS", 300.0)
# A running run whose step counter has not moved for this long while its heartbeat is alive
# gets a `stalled` alert naming what it is doing (worker/training/stall.py); 0 turns it off.
ENVLAB_STALL_SECONDS = env_float("ENVLAB_STALL_SECONDS", 900.0)
# The lab's trackio folder: runs with "report_to": ["trackio"] log there (worker/training/trackers.py).
ENVLAB_TRACKIO_DIR = env_path("ENVLAB_TRACKIO_DIR", VAR_DIR / "trackio")
# The Hugging Face Hub that "Push rollouts" / "Push episodes" upload to (worker/play/hub_push.py).
ENVLAB_HF_ENDPOINT = env_str("ENVLAB_HF_ENDPOINT", "https://huggingface.co").rstrip("/")
# Where the web app is reached from outside: run links in notifications are built on it.
ENVLAB_PUBLIC_URL = env_str("ENVLAB_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# Notification URLs (a user's `notify_url`, sent by apprise from the light worker) may name a
# loopback or private address only when this is on; link-local and metadata addresses never.
ENVLAB_NOTIFY_ALLOW_PRIVATE = env_bool("ENVLAB_NOTIFY_ALLOW_PRIVATE", False)
# How often a training process records its CPU, memory and GPU use (worker/training/system_metrics.py).
ENVLAB_SYSTEM_METRICS_SECONDS = env_float("ENVLAB_SYSTEM_METRICS_SECONDS", 15.0)
