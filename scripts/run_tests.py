"""`make test`: lint, type and migration checks, then the suite on PostgreSQL (when one is
reachable, as in production) and on SQLite (the embedded default), the two passes side by side
(ENVLAB_TEST_PASSES=serial: one after the other).

ENVLAB_TEST_DATABASES=sqlite|postgres|both (default both) and extra pytest arguments
after `--` narrow it down: `python scripts/run_tests.py -- -k lease`.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
POSTGRES_URL = os.environ.get("ENVLAB_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test")
# Whole-suite passes per database. With both databases, the two passes share the work that does
# not differ by engine, so that they end together: the PostgreSQL pass (production's engine) runs
# every test but the headless-browser ones and those marked `sqlite_pass`; the SQLite pass runs
# the tests with database access (pytest-django refuses it to the others: environment servers,
# adapters, solvers, settings) that are not slow, plus the browser tests (they check what a page
# does with the API's answers, whose queries the API tests check on both engines) and the slow
# tests marked `sqlite_pass` (engine-blind ones, such as the demo model's learning curve).
PG_MARKERS = "not browser and not sqlite_pass"
SQLITE_MARKERS = os.environ.get("ENVLAB_SQLITE_MARKERS", "")
# With both databases, the SQLite pass runs beside the PostgreSQL pass ("parallel", the
# default), at a lower CPU priority, with a Redis server and a var dir (its SQLite file, runs,
# models, service logs) of its own: the PostgreSQL pass's end-to-end tests spend much of
# their time waiting on a worker, and the SQLite pass takes those cycles. "serial" runs them
# one after the other, as before.
PASSES = os.environ.get("ENVLAB_TEST_PASSES", "parallel")
SQLITE_PASS_VAR = ROOT / "var" / "sqlite-pass"
SQLITE_PASS_NICE = 10


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
    which = os.environ.get("ENVLAB_TEST_DATABASES", "both")
    if which not in ("both", "postgres", "sqlite") or PASSES not in ("parallel", "serial"):
        print(f"ENVLAB_TEST_DATABASES is sqlite, postgres or both (it is {which!r}); ENVLAB_TEST_PASSES is parallel "
              f"or serial (it is {PASSES!r})", file=sys.stderr)
        return 1
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
    postgres = which in ("both", "postgres") and reachable(POSTGRES_URL)
    if which == "postgres" and not postgres:
        print(f"PostgreSQL is not reachable at {POSTGRES_URL}", file=sys.stderr)
        return 1
    if which == "both" and not postgres:
        print(f"PostgreSQL not reachable at {POSTGRES_URL}: running on SQLite only", flush=True)
    # The slowest tests of each pass, at the end of its output: where `make test`'s time goes.
    durations = ["--durations=40", "--durations-min=5"]
    # Markers before the extra arguments: an `-m` of the caller's, the last one given, wins.
    postgres_args = [PY, "-m", "pytest", *durations, *(["-m", PG_MARKERS] if which == "both" else []), *extra]
    postgres_env = {**base_env, "DATABASE_URL": POSTGRES_URL}
    if which == "postgres":
        return run(postgres_args, postgres_env)
    # Slow tests (minutes of training) and browser tests do not differ by database: once is enough.
    markers = SQLITE_MARKERS or ("browser or sqlite_pass or not slow" if postgres else "")
    sqlite_args = [PY, "-m", "pytest", *durations, *(["-m", markers] if markers else []),
                   *(["--database-tests-only"] if postgres else []), *extra]
    if not postgres:
        return run(sqlite_args, base_env)
    if PASSES == "serial":
        code = run(postgres_args, postgres_env)
        return run(sqlite_args, base_env) or code
    return run_side_by_side(postgres_args, postgres_env, sqlite_args, base_env)


def run_side_by_side(postgres_args: list[str], postgres_env: dict[str, str],
                     sqlite_args: list[str], base_env: dict[str, str]) -> int:
    """The PostgreSQL pass in the foreground; the SQLite pass beside it, niced, with its own
    Redis and var dir, its output kept in a file and printed when both are done."""
    from tests.support.ports import free_port
    from tests.support.redis_server import start_redis, stop_redis

    shutil.rmtree(SQLITE_PASS_VAR, ignore_errors=True)
    SQLITE_PASS_VAR.mkdir(parents=True)
    # The end-to-end tests' demo model, built once here and read by both passes (each would
    # otherwise build it on first use, and the two builds could meet in one folder).
    models_dir = Path(base_env.get("ENVLAB_MODELS_DIR") or Path(base_env.get("ENVLAB_VAR_DIR") or ROOT / "var")
                      / "test-models")
    if run([PY, "manage.py", "build_demo_model", "echo", "--variant", "test", "--if-missing"],
           {**base_env, "ENVLAB_MODELS_DIR": str(models_dir)}) != 0:
        return 1
    log_path = SQLITE_PASS_VAR / "pytest.log"
    port = free_port()
    start_redis(port)
    try:
        sqlite_env = {**base_env, "REDIS_URL": f"redis://127.0.0.1:{port}/0", "ENVLAB_VAR_DIR": str(SQLITE_PASS_VAR),
                      "ENVLAB_MODELS_DIR": str(models_dir)}
        print(f"+ (SQLite pass, beside it, nice {SQLITE_PASS_NICE}; output in {log_path})", " ".join(sqlite_args),
              flush=True)
        started = time.monotonic()
        with open(log_path, "wb") as log:
            sqlite = subprocess.Popen(
                ["nice", "-n", str(SQLITE_PASS_NICE), *sqlite_args], cwd=ROOT, env=sqlite_env,
                stdout=log, stderr=subprocess.STDOUT,
            )
            try:
                postgres_code = run(postgres_args, postgres_env)
                print(f"PostgreSQL pass done in {time.monotonic() - started:.0f} s; waiting for the SQLite pass",
                      flush=True)
                sqlite_code = sqlite.wait()
            finally:
                if sqlite.poll() is None:  # interrupted: pytest tears its fixtures down on SIGINT
                    sqlite.send_signal(signal.SIGINT)
                    sqlite.wait(timeout=120)
        print(f"\n===== SQLite pass ({time.monotonic() - started:.0f} s since both started) =====", flush=True)
        sys.stdout.write(log_path.read_text(errors="replace"))
        sys.stdout.flush()
        return postgres_code or sqlite_code
    finally:
        stop_redis(port)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
