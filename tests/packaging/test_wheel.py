"""A real installable server (issue 21 item 4): the wheel `pip wheel .` builds, installed into a
fresh virtualenv, runs the lab from site-packages with its state in the user's data folder.

The fresh virtualenv gets the wheel alone (`--no-deps`); its dependencies come from the
suite's own .venv through a .pth line, which appends that folder after the fresh
site-packages (so `webapp` is the wheel's, never the clone's editable install, whose import
hook lives in a .pth file that a path added this way does not run). Installing Django, torch
and the rest again from the registry would take minutes and prove nothing about the wheel."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import urllib.request
from pathlib import Path

import pytest

from tests.support.ports import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.sqlite_pass]

REPO = Path(__file__).resolve().parents[2]
# What a clean clone holds: no virtualenvs, state, build leftovers or caches.
NOT_SOURCE = shutil.ignore_patterns(
    ".git", ".venv*", "var", "build", "*.egg-info", "__pycache__", ".*_cache", "node_modules", ".whl", ".gl"
)


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=600, **kwargs)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("wheel")
    source, dist, fresh = root / "src", root / "dist", root / "fresh"
    shutil.copytree(REPO, source, ignore=NOT_SOURCE)
    built = _run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                  "-q", "-w", str(dist)])
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = dist.glob("envlab-*.whl")
    assert _run([sys.executable, "-m", "venv", "--without-pip", str(fresh)]).returncode == 0
    python = fresh / "bin" / "python"
    done = _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q", str(wheel)])
    assert done.returncode == 0, done.stderr[-3000:]
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (site / "_envlab_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items()
           if k not in {"DJANGO_SETTINGS_MODULE", "ENVLAB_VAR_DIR", "DATABASE_URL", "PYTHONPATH",
                        "ENVLAB_RUNS_DIR", "ENVLAB_MODELS_DIR"}}
    env.update(XDG_DATA_HOME=str(root / "data"), HOME=str(root / "home"), ALLOWED_HOSTS="127.0.0.1")
    work = root / "elsewhere"  # not the clone: nothing resolves through the working directory
    work.mkdir()
    return {"bin": fresh / "bin", "site": site, "env": env, "cwd": work, "data": root / "data" / "envlab"}


def _server(installed: dict, *args: str) -> subprocess.CompletedProcess[str]:
    return _run([str(installed["bin"] / "envlab-server"), *args], env=installed["env"], cwd=installed["cwd"])


def test_the_installed_wheel_checks_sets_up_and_serves_its_pages_with_their_styles(installed):
    # Before setup: the check fails on the database, and says what to run.
    before = _server(installed, "check")
    assert before.returncode == 1, before.stdout + before.stderr
    assert "FAIL database: RuntimeError:" in before.stdout
    assert "migrations not applied: run `envlab-server setup`" in before.stdout

    setup = _server(installed, "setup", "--no-demo-model")
    assert setup.returncode == 0, setup.stdout[-2000:] + setup.stderr[-3000:]
    check = _server(installed, "check")
    assert check.returncode == 0, check.stdout + check.stderr[-3000:]
    lines = dict(line[5:].split(": ", 1) for line in check.stdout.splitlines() if line[:5] in ("ok   ", "FAIL "))
    # The code is the wheel's, in the fresh site-packages; the state is in the user's data folder.
    assert lines["code"] == str(installed["site"])
    assert lines["state"] == f"{installed['data']} (writable)"
    assert (installed["data"] / "db.sqlite3").is_file()
    assert lines["pages"] == "templates and static files found"
    assert set(lines) == {"settings", "code", "state", "django", "database", "redis", "pages"}

    port = free_port()
    web = subprocess.Popen(
        [str(installed["bin"] / "envlab-server"), "web", "--port", str(port)],
        env=installed["env"], cwd=installed["cwd"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        page = _get_when_up(f"http://127.0.0.1:{port}/login/", web)
        [css] = re.findall(r'href="(/static/css/app\.css[^"]*)"', page.decode())
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{css}", timeout=10) as response:
            assert response.status == 200
            assert response.headers["Content-Type"].startswith("text/css")
            assert response.read() == (REPO / "webapp" / "static" / "css" / "app.css").read_bytes()
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(20)


def _get_when_up(url: str, process: subprocess.Popen[bytes], timeout: float = 90) -> bytes:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read().decode(errors="replace") if process.stdout else ""
            raise AssertionError(f"the web server exited with {process.returncode}: {output[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                assert response.status == 200
                return response.read()
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"{url} did not answer within {timeout:g} s")
