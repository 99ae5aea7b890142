"""`make test`'s second pass (SQLite after PostgreSQL) keeps only the tests that can differ by
database engine: `--database-tests-only` (tests/conftest.py) drops those pytest-django gives
no database."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _collected(*args: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args,
         "tests/webapp/test_layering.py", "tests/api/test_demo_api.py", "tests/webapp/test_auth.py"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return {line for line in out.stdout.splitlines() if "::" in line}


def test_the_second_pass_keeps_the_tests_with_database_access_only():
    everything = _collected()
    kept = _collected("--database-tests-only")
    dropped = everything - kept
    assert kept < everything
    # No database: the import check and the settings checks run in processes of their own.
    assert "tests/webapp/test_layering.py::test_the_web_app_imports_no_worker_code_and_no_torch" in dropped
    assert "tests/webapp/test_auth.py::test_production_settings_require_a_database_url" in dropped
    # The django_db marker, or a fixture that asks for the database.
    assert {t for t in everything if t.startswith("tests/api/test_demo_api.py")} <= kept
    assert "tests/webapp/test_auth.py::test_an_expired_token_is_refused_and_removed" in kept
