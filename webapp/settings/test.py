"""Test settings: real Redis and database, fast password hashing, a var dir per run."""

from webapp.accounts.crypto import fernet_key_from
from webapp.settings.env import env_bool, env_float, env_path, env_str

from .base import *  # noqa: F403

SECRET_KEY = "envlab-test-only"
# A test's own server may turn it on to see what a visitor would get with DEBUG on.
DEBUG = env_bool("ENVLAB_TEST_DEBUG", False)
# Real host names, so the WebSocket origin check is exercised.
ALLOWED_HOSTS = ["localhost", "127.0.0.1", "testserver"]
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
ENVLAB_PROBE_TIMEOUT = env_float("ENVLAB_PROBE_TIMEOUT", 3.0)

# Tests share the machine's Redis with `make run`: keep to their own database number.
REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/9")
CHANNEL_LAYERS["default"]["CONFIG"]["hosts"] = [{"address": REDIS_URL, "socket_timeout": None}]  # noqa: F405
CELERY_BROKER_URL = REDIS_URL
# A file, not memory: servers started by the tests (uvicorn, the Celery worker) must see
# the same database as the test process.
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":  # noqa: F405
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}  # noqa: F405
ENVLAB_HEARTBEAT_SECONDS = 1.0
ENVLAB_STALE_SECONDS = env_float("ENVLAB_STALE_SECONDS", 8.0)
ENVLAB_INTERRUPT_SECONDS = env_float("ENVLAB_INTERRUPT_SECONDS", 16.0)
# An environment server restarted by a test is back within seconds; one kept down longer
# than this stops its run (interrupted) without the tests waiting five minutes.
ENVLAB_ENV_OUTAGE_SECONDS = env_float("ENVLAB_ENV_OUTAGE_SECONDS", 20.0)
# The tests' own demo model (the fast "test" variant) and checkpoints, apart from `make run`'s.
RUNS_DIR = env_path("ENVLAB_RUNS_DIR", VAR_DIR / "test-runs")  # noqa: F405
MODELS_DIR = env_path("ENVLAB_MODELS_DIR", VAR_DIR / "test-models")  # noqa: F405
ENVLAB_TRACKIO_DIR = env_path("ENVLAB_TRACKIO_DIR", VAR_DIR / "test-trackio")  # noqa: F405
# Test servers listen on loopback; tests that check refusals override this.
ENVLAB_ALLOWED_ENV_NETWORKS = ["127.0.0.0/8", "::1/128"]
# Notifications go to a listener the test starts on loopback; tests of the refusal turn it off.
ENVLAB_NOTIFY_ALLOW_PRIVATE = True
# A sample a second: a three-step test run records a few.
ENVLAB_SYSTEM_METRICS_SECONDS = env_float("ENVLAB_SYSTEM_METRICS_SECONDS", 1.0)
ENVLAB_SECRETS_KEY = fernet_key_from(SECRET_KEY)
# Throttle counters per test process; the suite's own traffic stays far below these rates
# (tests that check throttling lower a rate with the `settings` fixture).
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
REST_FRAMEWORK = {
    **REST_FRAMEWORK,  # noqa: F405
    "DEFAULT_THROTTLE_RATES": {
        scope: "100000/min" for scope in REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]  # noqa: F405
    },
}
