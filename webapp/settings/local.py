"""Local development and `make run`: the embedded defaults (SQLite, local Redis).

Safe on a laptop: only loopback host names are served (so a DNS-rebinding page cannot reach
the app, and the WebSocket origin check refuses foreign pages), DEBUG is off unless
DEBUG=1, and the demo login gets a random password (webapp.accounts.services).
"""

from webapp.accounts.crypto import fernet_key_from
from webapp.settings.env import env_bool, env_list, env_str

from .base import *  # noqa: F403

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "envlab-local-development-only-not-secret")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1")
# The bundled environment servers listen on loopback.
ENVLAB_ALLOWED_ENV_NETWORKS = env_list("ENVLAB_ALLOWED_ENV_NETWORKS", "127.0.0.0/8,::1/128")
ENVLAB_SECRETS_KEY = env_str("ENVLAB_SECRETS_KEY", "") or fernet_key_from(SECRET_KEY)
# `make run` has no collectstatic step: WhiteNoise serves the scripts and styles straight from
# the source tree (STATICFILES_DIRS), with DEBUG off as well as on.
WHITENOISE_USE_FINDERS = True
