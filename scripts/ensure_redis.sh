#!/usr/bin/env bash
# Make sure a Redis server answers at $REDIS_URL (default redis://127.0.0.1:6379/0):
# start an installed redis-server, install Debian's package when root, or say what to do.
set -euo pipefail
url="${REDIS_URL:-redis://127.0.0.1:6379/0}"
hostport="${url#redis://}"; hostport="${hostport%%/*}"; hostport="${hostport##*@}"
host="${hostport%%:*}"; port="${hostport##*:}"; [ "$port" = "$host" ] && port=6379
ping() { python3 - "$host" "$port" <<'PY'
import socket, sys
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1)
    s.sendall(b"PING\r\n"); ok = s.recv(16).startswith(b"+PONG"); s.close()
except OSError:
    ok = False
sys.exit(0 if ok else 1)
PY
}
if ping; then echo "redis: reachable at $host:$port"; exit 0; fi
case "$host" in 127.0.0.1|localhost) ;; *) echo "redis: nothing answers at $host:$port; start it or set REDIS_URL" >&2; exit 1;; esac
if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "redis: installing Debian's redis-server ..."
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >/dev/null
  else
    echo "redis: not installed. Install it (sudo apt-get install redis-server) or set REDIS_URL to a running server." >&2
    exit 1
  fi
fi
mkdir -p var/redis
redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
  --dir "$PWD/var/redis" --logfile "$PWD/var/redis/redis.log"
for _ in $(seq 1 50); do ping && { echo "redis: started on $host:$port"; exit 0; }; sleep 0.1; done
echo "redis: failed to start; see var/redis/redis.log" >&2
exit 1
