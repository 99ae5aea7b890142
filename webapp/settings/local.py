"""Local development and `make run`: the embedded defaults (SQLite, local Redis).

Safe on a laptop: only loopback host names are served (so a DNS-rebinding page cannot reach
the app, and the WebSocket origin check refuses foreign pages), DEBUG is off unless
DEBUG=1, and the demo login gets a random password (webapp.accounts.services).

On a machine shared with other accounts: SECRET_KEY and the key that encrypts stored user
secrets are random per installation, kept in `var/secret-key` and `var/secrets-key` (mode
600) unless the environment sets them, and `var/` and the SQLite database are readable by
their owner only.
"""

import os
from pathlib import Path

from cryptography.fernet import Fernet

from webapp.accounts.crypto import fernet_key_from
from webapp.settings.env import env_bool, env_list, env_str
from webapp.settings.installation import PRIVATE_DIR, installation_secret, make_private

from .base import *  # noqa: F403
from .base import DATABASES, VAR_DIR

# What older installations used: a public constant. Only for reading secrets stored under
# it; webapp.accounts.secrets re-encrypts each under the installation's key.
LEGACY_SECRET_KEY = "envlab-local-development-only-not-secret"

make_private(VAR_DIR, PRIVATE_DIR)
_sqlite = DATABASES["default"]
if "sqlite" in _sqlite["ENGINE"] and str(_sqlite["NAME"]) != ":memory:":
    _db_file = Path(_sqlite["NAME"])
    if not _db_file.exists() and _db_file.parent.is_dir():
        # SQLite takes an empty file as a new database, and its -wal and -shm files copy the
        # database file's mode: created private, they stay private.
        os.close(os.open(_db_file, os.O_WRONLY | os.O_CREAT, 0o600))
    for _suffix in ("", "-wal", "-shm", "-journal"):
        make_private(_db_file.with_name(_db_file.name + _suffix))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", "") or installation_secret(VAR_DIR / "secret-key")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "localhost,127.0.0.1")
# The bundled environment servers listen on loopback.
ENVLAB_ALLOWED_ENV_NETWORKS = env_list("ENVLAB_ALLOWED_ENV_NETWORKS", "127.0.0.0/8,::1/128")
ENVLAB_SECRETS_KEY = env_str("ENVLAB_SECRETS_KEY", "") or installation_secret(
    VAR_DIR / "secrets-key", lambda: Fernet.generate_key().decode()
)
ENVLAB_SECRETS_PREVIOUS_KEYS = [fernet_key_from(LEGACY_SECRET_KEY)]
# `make run` has no collectstatic step: WhiteNoise serves the scripts and styles straight from
# the source tree (STATICFILES_DIRS), with DEBUG off as well as on.
WHITENOISE_USE_FINDERS = True
