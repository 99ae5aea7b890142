#!/usr/bin/env bash
# The Harbor server's own environment, .venv-harbor: openenv's Harbor extra (the `harbor`
# package) needs Python >= 3.12 while the lab is on 3.11, and its pins do not resolve with the
# lab's. The lab talks HTTP/MCP to the server, so nothing of it has to share the lab's Python.
#   scripts/harbor_env.sh      create or update it (constraints-harbor.txt, the whole lock)
# Then: .venv-harbor/bin/openenv harbor serve --dataset <folder or name@version> ...
# Exit status 3: no Python 3.12 or newer was found (set HARBOR_PYTHON=/path/to/python3.12).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${HARBOR_VENV:-.venv-harbor}
STAMP=$VENV/.installed
if [ -f "$STAMP" ] && [ "$STAMP" -nt constraints-harbor.txt ]; then
  exit 0
fi
new_enough() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
PY=${HARBOR_PYTHON:-}
if [ -z "$PY" ]; then
  for candidate in python3.12 python3.13; do
    if command -v "$candidate" >/dev/null 2>&1 && new_enough "$candidate"; then
      PY=$(command -v "$candidate"); break
    fi
  done
fi
if [ -z "$PY" ] && command -v pyenv >/dev/null 2>&1; then
  for version in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.1[2-9]' || true); do
    candidate="$(pyenv root)/versions/$version/bin/python"
    if new_enough "$candidate"; then PY=$candidate; break; fi
  done
fi
if [ -z "$PY" ]; then
  echo "harbor: openenv's Harbor extra needs Python 3.12 or newer, and none was found; install one" \
       "(or set HARBOR_PYTHON=/path/to/python3.12) and run scripts/harbor_env.sh again" >&2
  exit 3
fi
echo "harbor: installing openenv's Harbor extra into $VENV with $("$PY" --version) (a few minutes) ..."
rm -rf "$VENV"
mkdir -p var
LOG=var/harbor-env.log
# The lock is complete (it was frozen from an install of "openenv[harbor]"): installed as it
# stands, with no resolving, then checked.
if ! { "$PY" -m venv "$VENV" \
       && grep -v '^#' constraints-harbor.txt > "$VENV/requirements.txt" \
       && "$VENV/bin/python" -m pip install -q --no-deps -r "$VENV/requirements.txt" \
       && "$VENV/bin/python" -m pip check; } >"$LOG" 2>&1; then
  tail -n 30 "$LOG" >&2
  echo "harbor: the install failed (the whole log: $LOG)" >&2
  exit 1
fi
touch "$STAMP"
