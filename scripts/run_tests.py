"""`make test`: lint, type and migration checks, then the suite on PostgreSQL (when one is
reachable, as in production) and on SQLite (the embedded default).

ENVLAB_TEST_DATABASES=sqlite|postgres|both (default both) and extra pytest arguments
after `--` narrow it down: `python scripts/run_tests.py -- -k lease`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
POSTGRES_URL = os.environ.get("ENVLAB_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
# Whole-suite passes per database. After PostgreSQL, the SQLite pass runs only the tests that
# can differ by engine: those with database access (pytest-django refuses it to the others:
# environment servers, adapters, solvers, settings), and not the slow end-to-end training,
# whose engine-dependent parts (leases, claims, telemetry writes) have their own fast tests,
# nor the headless-browser tests, which check what a page does with the API's answers: the
# queries behind those answers are tested on both engines by the API tests.
SQLITE_MARKERS = os.environ.get("ENVLAB_SQLITE_MARKERS", "")


def reachable(url: str) -> bool:
    hostport = url.split("@")[-1].split("/")[0]
    host, _, port = hostport.partition(":")
    try:
        socket.create_connection((host, int(port or 5432)), timeout=2).close()
        return True
    except OSError:
        return False


def run(args: list[str], env: dict[str, str] | None = None) -> int:
    print("+", " ".join(args), flush=True)
    return subprocess.run(args, cwd=ROOT, env=env).returncode


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from tests.support.ports import free_port
    from tests.support.redis_server import OWNED_FLAG, start_redis, stop_redis

    port = free_port()
    start_redis(port)
    try:
        return run_suites(argv, {"REDIS_URL": f"redis://127.0.0.1:{port}/0", OWNED_FLAG: "1"})
    finally:
        stop_redis(port)


def run_suites(argv: list[str], redis_env: dict[str, str]) -> int:
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    base_env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1",
                "DJANGO_SETTINGS_MODULE": "webapp.settings.test", "PYTHONUNBUFFERED": "1", **redis_env}
    base_env.pop("DATABASE_URL", None)
    if run([PY, "-m", "ruff", "check", "."]) != 0:
        return 1
    # The import contracts (pyproject.toml [tool.importlinter]): the apps' layers, no circles.
    if run([str(Path(PY).parent / "lint-imports")]) != 0:
        return 1
    # The packages pyproject.toml's [tool.mypy] names; the django plugin reads the test settings.
    if run([PY, "-m", "mypy"], base_env) != 0:
        return 1
    if run([PY, "manage.py", "makemigrations", "--check", "--dry-run"], base_env) != 0:
        print("models changed without a migration", file=sys.stderr)
        return 1
    which = os.environ.get("ENVLAB_TEST_DATABASES", "both")
    status = 0
    ran_postgres = False
    if which in ("both", "postgres"):
        if reachable(POSTGRES_URL):
            code = run([PY, "-m", "pytest", *extra], {**base_env, "DATABASE_URL": POSTGRES_URL})
            status = status or code
            ran_postgres = True
        elif which == "postgres":
            print(f"PostgreSQL is not reachable at {POSTGRES_URL}", file=sys.stderr)
            return 1
        else:
            print(f"PostgreSQL not reachable at {POSTGRES_URL}: running on SQLite only", flush=True)
    if which in ("both", "sqlite"):
        args = [PY, "-m", "pytest", *extra]
        # Slow tests (minutes of training) and browser tests do not differ by database: once is enough.
        markers = SQLITE_MARKERS or ("not slow and not browser" if ran_postgres else "")
        if markers:
            args += ["-m", markers]
        if ran_postgres:
            args += ["--database-tests-only"]
        status = run(args, base_env) or status
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
