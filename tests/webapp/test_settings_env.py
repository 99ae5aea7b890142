"""Settings read their environment variables through webapp/settings/env.py: a bad value stops
the settings import with the variable's name and the value, and an unset one keeps the
documented default. Each case imports the settings afresh in its own Python process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
PRODUCTION_ENV = {
    "SECRET_KEY": "k" * 50,
    "ALLOWED_HOSTS": "envlab.example.com",
    "DATABASE_URL": "sqlite:////tmp/envlab-settings-env.sqlite3",
    "ENVLAB_SECRETS_KEY": "Zm9vYmFyYmF6cXV4cXV1eGZvb2JhcmJhenF1eHF1dXg=",
}
DEFAULTS_CODE = """
import json, importlib, sys
s = importlib.import_module(sys.argv[1])
names = sys.argv[2].split(",")
print(json.dumps({n: getattr(s, n) for n in names}, default=str))
"""


def _clean_env(var_dir: Path, **extra: str) -> dict[str, str]:
    """Only what Python needs: no ENVLAB_*, DEBUG or ALLOWED_HOSTS of the machine's."""
    keep = {k: os.environ[k] for k in ("PATH", "HOME", "PYTHONPATH") if k in os.environ}
    return {**keep, "ENVLAB_VAR_DIR": str(var_dir), **extra}


def _import_settings(module: str, env: dict[str, str], names: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", DEFAULTS_CODE, module, ",".join(names)],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )


def test_unset_variables_keep_the_documented_defaults(tmp_path: Path) -> None:
    names = [
        "DEBUG", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "REDIS_URL", "RUNS_DIR", "MODELS_DIR",
        "ENVLAB_TRUSTED_PROXIES", "REST_KNOX", "AXES_FAILURE_LIMIT", "AXES_COOLOFF_TIME",
        "ENVLAB_MAX_REQUEST_BYTES", "ENVLAB_STALE_SECONDS", "ENVLAB_INTERRUPT_SECONDS",
        "ENVLAB_CANCEL_GRACE_SECONDS", "ENVLAB_WORKER_SEEN_SECONDS", "ENVLAB_PROBE_TIMEOUT",
        "ENVLAB_PROBE_DEADLINE", "ENVLAB_RECHECK_SECONDS", "ENVLAB_TRUST_ENV_PROXIES",
        "ENVLAB_MAX_RESPONSE_BYTES", "ENVLAB_MAX_TOOL_TEXT", "ENVLAB_API_KEY_ENV_ALLOWED",
        "ENVLAB_IMAGE_REGISTRIES", "ENVLAB_CONSOLE_MAX_SOCKETS", "ENVLAB_MAX_ACTIVE_RUNS",
        "ENVLAB_MODEL_ROOTS", "ENVLAB_REQUEUE_SECONDS", "ENVLAB_TELEMETRY_OUTAGE_SECONDS",
        "ENVLAB_TELEMETRY_MAX_PENDING", "ENVLAB_ALLOWED_ENV_NETWORKS", "ENVLAB_OPENREWARD_API_URL",
    ]
    run = _import_settings("webapp.settings.local", _clean_env(tmp_path), names)
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout) == {
        "DEBUG": False,
        "ALLOWED_HOSTS": ["localhost", "127.0.0.1"],
        "CSRF_TRUSTED_ORIGINS": [],
        "REDIS_URL": "redis://127.0.0.1:6379/0",
        "RUNS_DIR": str(tmp_path / "runs"),
        "MODELS_DIR": str(tmp_path / "models"),
        "ENVLAB_TRUSTED_PROXIES": 0,
        "REST_KNOX": {"TOKEN_TTL": "30 days, 0:00:00", "AUTH_HEADER_PREFIX": "Token", "TOKEN_LIMIT_PER_USER": 50},
        "AXES_FAILURE_LIMIT": 5,
        "AXES_COOLOFF_TIME": "0:15:00",
        "ENVLAB_MAX_REQUEST_BYTES": 7340032,
        "ENVLAB_STALE_SECONDS": 20.0,
        "ENVLAB_INTERRUPT_SECONDS": 45.0,
        "ENVLAB_CANCEL_GRACE_SECONDS": 300.0,
        "ENVLAB_WORKER_SEEN_SECONDS": 300.0,
        "ENVLAB_PROBE_TIMEOUT": 5.0,
        "ENVLAB_PROBE_DEADLINE": 10.0,
        "ENVLAB_RECHECK_SECONDS": 60.0,
        "ENVLAB_TRUST_ENV_PROXIES": False,
        "ENVLAB_MAX_RESPONSE_BYTES": 4194304,
        "ENVLAB_MAX_TOOL_TEXT": 65536,
        "ENVLAB_API_KEY_ENV_ALLOWED": ["OPENREWARD_API_KEY"],
        "ENVLAB_IMAGE_REGISTRIES": [],
        "ENVLAB_CONSOLE_MAX_SOCKETS": 4,
        "ENVLAB_MAX_ACTIVE_RUNS": 4,
        "ENVLAB_MODEL_ROOTS": [],
        "ENVLAB_REQUEUE_SECONDS": 180.0,
        "ENVLAB_TELEMETRY_OUTAGE_SECONDS": 600.0,
        "ENVLAB_TELEMETRY_MAX_PENDING": 5000,
        "ENVLAB_ALLOWED_ENV_NETWORKS": ["127.0.0.0/8", "::1/128"],
        "ENVLAB_OPENREWARD_API_URL": "https://api.openreward.ai",
    }


def test_production_switches_default_to_on_and_read_words(tmp_path: Path) -> None:
    names = ["SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD"]
    defaults = _import_settings("webapp.settings.production", _clean_env(tmp_path, **PRODUCTION_ENV), names)
    worded = _import_settings(
        "webapp.settings.production",
        _clean_env(tmp_path, **PRODUCTION_ENV, ENVLAB_SSL_REDIRECT="False", ENVLAB_HSTS_PRELOAD="off",
                   ENVLAB_HSTS_SECONDS="60", ENVLAB_PROXY_SSL_HEADER=" yes "),
        [*names, "SECURE_PROXY_SSL_HEADER"],
    )
    assert defaults.returncode == 0, defaults.stderr[-2000:]
    assert worded.returncode == 0, worded.stderr[-2000:]
    assert json.loads(defaults.stdout) == {
        "SECURE_SSL_REDIRECT": True, "SECURE_HSTS_SECONDS": 31536000,
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": True, "SECURE_HSTS_PRELOAD": True,
    }
    assert json.loads(worded.stdout) == {
        "SECURE_SSL_REDIRECT": False, "SECURE_HSTS_SECONDS": 60, "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
        "SECURE_HSTS_PRELOAD": False, "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
    }


@pytest.mark.parametrize(
    ("module", "variable", "value", "message"),
    [
        ("webapp.settings.local", "ENVLAB_MAX_ACTIVE_RUNS", "4.5", "ENVLAB_MAX_ACTIVE_RUNS must be a whole number, got '4.5'"),
        ("webapp.settings.local", "ENVLAB_CANCEL_GRACE_SECONDS", "abc", "ENVLAB_CANCEL_GRACE_SECONDS must be a number, got 'abc'"),
        ("webapp.settings.local", "ENVLAB_TRUST_ENV_PROXIES", "ture",
         "ENVLAB_TRUST_ENV_PROXIES must be 1 or 0 (or true/false, yes/no, on/off), got 'ture'"),
        ("webapp.settings.local", "DEBUG", "", "DEBUG must be 1 or 0 (or true/false, yes/no, on/off), got ''"),
        ("webapp.settings.production", "ENVLAB_HSTS_SECONDS", "1y", "ENVLAB_HSTS_SECONDS must be a whole number, got '1y'"),
        ("webapp.settings.test", "ENVLAB_STALE_SECONDS", "", "ENVLAB_STALE_SECONDS must be a number, got ''"),
    ],
)
def test_a_bad_value_stops_django_setup_naming_the_variable_and_the_value(
    tmp_path: Path, module: str, variable: str, value: str, message: str
) -> None:
    env = _clean_env(tmp_path, **PRODUCTION_ENV, DJANGO_SETTINGS_MODULE=module, **{variable: value})
    run = subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); print('set up')"],
        cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert (run.returncode, run.stdout) == (1, "")
    assert run.stderr.strip().splitlines()[-1] == f"webapp.settings.env.EnvironmentVariableError: {message}"


def test_state_defaults_to_the_clones_var_or_else_the_users_data_folder(tmp_path, monkeypatch):
    from webapp.settings.env import default_var_dir

    clone = tmp_path / "clone"
    clone.mkdir()
    (clone / "manage.py").write_text("")
    assert default_var_dir(clone) == clone / "var"
    # Installed: site-packages has no manage.py; platformdirs follows XDG_DATA_HOME on Linux.
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_var_dir(tmp_path / "site-packages") == tmp_path / "data" / "envlab"
