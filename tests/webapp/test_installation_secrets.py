"""N11: `make run`'s keys are random per installation, not a public constant; they and the
SQLite database are readable by their owner only; values stored under the old constant-derived
key still read, and are stored again under the installation's key.

The settings cases import webapp.settings.local afresh in their own Python process, on a
scratch var/ folder, as `make run`'s processes do."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from webapp.accounts.crypto import fernet_key_from
from webapp.accounts.models import UserSecret
from webapp.accounts.secrets import user_secret_set, user_secret_value, user_secrets_reencrypt
from webapp.settings.installation import installation_secret

REPO_ROOT = Path(__file__).resolve().parents[2]
LEGACY = "envlab-local-development-only-not-secret"
CODE = """
import json, importlib
s = importlib.import_module("webapp.settings.local")
print(json.dumps({"SECRET_KEY": s.SECRET_KEY, "ENVLAB_SECRETS_KEY": s.ENVLAB_SECRETS_KEY}))
"""


def _local_settings(var_dir: Path) -> dict[str, str]:
    keep = {k: os.environ[k] for k in ("PATH", "HOME", "PYTHONPATH") if k in os.environ}
    done = subprocess.run(
        [sys.executable, "-c", CODE], cwd=REPO_ROOT, env={**keep, "ENVLAB_VAR_DIR": str(var_dir)},
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_local_keys_are_random_per_installation_private_and_kept(tmp_path):
    first_var, second_var = tmp_path / "one", tmp_path / "two"
    first_var.mkdir(mode=0o755)
    first_var.chmod(0o755)
    first = _local_settings(first_var)
    assert first["SECRET_KEY"] != LEGACY and len(first["SECRET_KEY"]) >= 50
    Fernet(first["ENVLAB_SECRETS_KEY"].encode())  # a real Fernet key, not one derived from a constant
    assert first["ENVLAB_SECRETS_KEY"] != fernet_key_from(first["SECRET_KEY"])
    for name in ("secret-key", "secrets-key", "db.sqlite3"):
        assert _mode(first_var / name) == 0o600, name
    assert _mode(first_var) == 0o700
    assert _local_settings(first_var) == first  # the next process reads the same keys
    assert _local_settings(second_var)["SECRET_KEY"] != first["SECRET_KEY"]  # another installation


def test_a_database_made_world_readable_before_is_made_private(tmp_path):
    (tmp_path / "db.sqlite3").write_bytes(b"")
    (tmp_path / "db.sqlite3").chmod(0o644)
    _local_settings(tmp_path)
    assert _mode(tmp_path / "db.sqlite3") == 0o600


def test_processes_starting_together_agree_on_one_secret(tmp_path):
    path = tmp_path / "secret-key"
    with ThreadPoolExecutor(8) as pool:
        values = set(pool.map(lambda _: installation_secret(path), range(32)))
    assert len(values) == 1 and values == {path.read_text().strip()}
    assert not [p for p in tmp_path.iterdir() if p.name != "secret-key"]  # no temporary left


@pytest.mark.django_db
def test_a_value_stored_under_the_legacy_key_reads_and_is_stored_again_under_the_current(
    owner, settings
):
    legacy = fernet_key_from(LEGACY)
    settings.ENVLAB_SECRETS_KEY = legacy
    user_secret_set(user=owner, name=UserSecret.Name.values[0], value="hf_old_value_1234")
    old = UserSecret.objects.get(user=owner).ciphertext

    settings.ENVLAB_SECRETS_KEY = Fernet.generate_key().decode()
    settings.ENVLAB_SECRETS_PREVIOUS_KEYS = []
    assert user_secret_value(user=owner, name=UserSecret.Name.values[0]) is None  # no key reads it

    settings.ENVLAB_SECRETS_PREVIOUS_KEYS = [legacy]
    assert user_secret_value(user=owner, name=UserSecret.Name.values[0]) == "hf_old_value_1234"
    new = UserSecret.objects.get(user=owner).ciphertext
    assert new != old
    Fernet(settings.ENVLAB_SECRETS_KEY.encode()).decrypt(new.encode())  # under the current key now

    # and in bulk, as envlab_setup does at `make run`'s start
    UserSecret.objects.filter(user=owner).update(ciphertext=old)
    assert user_secrets_reencrypt() == 1
    assert user_secrets_reencrypt() == 0
    settings.ENVLAB_SECRETS_PREVIOUS_KEYS = []
    assert user_secret_value(user=owner, name=UserSecret.Name.values[0]) == "hf_old_value_1234"
