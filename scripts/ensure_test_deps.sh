#!/usr/bin/env bash
# What the test suite needs beyond the Python packages: Redis, Debian's Chromium for the
# browser tests, and the Harbor server's own Python 3.12 environment for the tests against a
# real `openenv harbor serve`. PostgreSQL is used when reachable (scripts/run_tests.py decides).
set -euo pipefail
scripts/ensure_redis.sh
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "chromium: installing Debian's package for the browser tests ..."
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium) >/dev/null
  else
    echo "chromium: not installed; browser tests will fail. Install it: sudo apt-get install chromium" >&2
    exit 1
  fi
fi
echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present)"
# The real Harbor server's tests skip, saying why, where no Python 3.12 can be found.
status=0
scripts/harbor_env.sh || status=$?
if [ "$status" = 3 ]; then
  echo "harbor: no Python 3.12; the tests against a real Harbor server will be skipped" >&2
elif [ "$status" != 0 ]; then
  exit "$status"
else
  echo "harbor: $(.venv-harbor/bin/python --version) with $(.venv-harbor/bin/pip show harbor 2>/dev/null | grep ^Version || echo harbor)"
fi
