#!/usr/bin/env bash
# What the test suite needs beyond the Python packages: Redis, and Debian's Chromium for
# the browser tests. PostgreSQL is used when reachable (scripts/run_tests.py decides).
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
