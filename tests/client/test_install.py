"""envlab-client installs on its own: `pip install ./client` into a fresh virtualenv (from the
package registry, as a user's machine would), and importing it, its CLI and its socket client
loads neither Django nor torch."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "client"


# About 25 s with a warm pip cache (the brief's line for `slow` is 30 s).
@pytest.mark.timeout(600)
def test_a_fresh_venv_installs_the_client_without_django_or_torch(tmp_path):
    source = tmp_path / "client"
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("*.egg-info", "__pycache__", "build"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", str(source)], capture_output=True, text=True, timeout=540
    )
    assert install.returncode == 0, install.stderr[-3000:]

    probe = (
        "import json, sys\n"
        "import envlab_client, envlab_client.cli, envlab_client.live, envlab_client.config\n"
        "from envlab_client import Client, EnvlabError\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'torch', 'transformers', 'trl'})))\n"
    )
    loaded = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=60)
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout) == []
    installed = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True)
    names = {p["name"].lower() for p in json.loads(installed.stdout)}
    assert {"envlab-client", "requests", "typer", "platformdirs", "websockets"} <= names
    assert not names & {"django", "torch", "pyarrow"}

    helped = subprocess.run([str(venv / "bin" / "envlab"), "runs", "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0, helped.stderr
    assert "launch" in helped.stdout and "metrics" in helped.stdout
    # Parquet tables need the extra; without it the message says how to get it.
    no_parquet = subprocess.run(
        [str(python), "-c", "import envlab_client\ntry:\n envlab_client.read_parquet('x')\n"
         "except envlab_client.EnvlabError as e:\n print(e)"],
        capture_output=True, text=True, timeout=60,
    )
    assert no_parquet.stdout.strip() == (
        "reading Parquet needs pyarrow: pip install 'envlab-client[parquet]' (downloads need nothing more)"
    )
