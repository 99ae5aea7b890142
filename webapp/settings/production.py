"""Production: secrets, hosts and the database come from the environment, with no defaults.

Behind a TLS-terminating proxy, set ENVLAB_PROXY_SSL_HEADER=1 only when the proxy sets
X-Forwarded-Proto itself (and strips a client's); set CSRF_TRUSTED_ORIGINS to the public
https origin(s). Give Redis a password in REDIS_URL (redis://:password@host:6379/0).
`manage.py check --deploy --fail-level WARNING` is clean with these settings.
"""

import os

from webapp.settings.env import env_bool, env_int

from .base import *  # noqa: F403

SECRET_KEY = os.environ["SECRET_KEY"]
ALLOWED_HOSTS = [h for h in os.environ["ALLOWED_HOSTS"].split(",") if h]
if "DATABASE_URL" not in os.environ:
    raise RuntimeError("production settings need DATABASE_URL (e.g. postgres://user:pw@host:5432/envlab)")
# Fernet key (`python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"`).
ENVLAB_SECRETS_KEY = os.environ["ENVLAB_SECRETS_KEY"]

SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_SSL_REDIRECT = env_bool("ENVLAB_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = env_int("ENVLAB_HSTS_SECONDS", 365 * 24 * 3600)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("ENVLAB_HSTS_INCLUDE_SUBDOMAINS", True)
SECURE_HSTS_PRELOAD = env_bool("ENVLAB_HSTS_PRELOAD", True)
if env_bool("ENVLAB_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
