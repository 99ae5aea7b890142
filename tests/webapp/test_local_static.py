"""`make run` (webapp.settings.local, DEBUG off by default, no collectstatic step) serves the
dashboard's scripts and styles: without them no chart, live update or form script works."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CODE = """
import django
django.setup()
from django.test import Client
client = Client()
print([client.get(path).status_code for path in ("/static/js/run_live.js", "/static/css/app.css", "/static/js/nope.js")])
"""


def test_the_local_settings_serve_static_files_with_debug_off(tmp_path: Path) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.local", "DEBUG": "0",
           "ALLOWED_HOSTS": "testserver", "ENVLAB_VAR_DIR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    run = subprocess.run([sys.executable, "-c", CODE], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "[200, 200, 404]"
