"""Local development and `make run`: the embedded defaults (SQLite, local Redis)."""

import os

from .base import *  # noqa: F403

DEBUG = os.environ.get("DEBUG", "1") == "1"
SECRET_KEY = os.environ.get("SECRET_KEY", "envlab-local-development-only-not-secret")
ALLOWED_HOSTS = ["*"]
# The bundled environment servers listen on loopback.
ENVLAB_ALLOWED_ENV_NETWORKS = env_list("ENVLAB_ALLOWED_ENV_NETWORKS", "127.0.0.0/8,::1/128")  # noqa: F405
