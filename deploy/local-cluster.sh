#!/bin/sh
# deploy/local-cluster.sh start|stop|status|redis-stop|redis-start
# A wick cluster on this machine's loopback: one Redis (deploy/redis.conf), N `wick serve`
# replicas sharing prefix states through it, and nginx (deploy/nginx.conf.in) in front.
# For trying the topology and for the tests; README "Scaling out".
#
# Environment (defaults in brackets):
#   WICK_BIN           the wick binary [build/wick beside this folder]
#   WICK_ARGS          extra arguments of every replica, e.g. "--model m.pth --threads 1" []
#   WICK_REPLICAS      number of replicas [2]
#   WICK_NGINX_PORT    nginx's port; replicas take the next N ports [18080]
#   WICK_REDIS_PORT    Redis's port [16379]
#   WICK_REDIS_MAXMEMORY  Redis's maxmemory [256mb]
#   WICK_CLUSTER_DIR   pid files, logs, nginx's files [${TMPDIR:-/tmp}/wick-cluster]
# Replica i (1..N) is named r<i> (its X-Wick-Replica header); its pid is in $DIR/r<i>.pid and its
# log in $DIR/r<i>.log.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
BIN=${WICK_BIN:-$here/../build/wick}
ARGS=${WICK_ARGS:-}
N=${WICK_REPLICAS:-2}
NGINX_PORT=${WICK_NGINX_PORT:-18080}
REDIS_PORT=${WICK_REDIS_PORT:-16379}
MAXMEM=${WICK_REDIS_MAXMEMORY:-256mb}
DIR=${WICK_CLUSTER_DIR:-${TMPDIR:-/tmp}/wick-cluster}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)

die() { echo "local-cluster: $*" >&2; exit 1; }

# Waits (up to $2 seconds) until file $1 contains $3; gives up at once when pid file $4 (if
# given) names a process that has exited.
wait_for_text() {
  waited=0
  while ! grep -q "$3" "$1" 2>/dev/null; do
    waited=$((waited + 1))
    [ "$waited" -le $(($2 * 10)) ] || return 1
    if [ -n "${4:-}" ] && ! alive "$4"; then return 1; fi
    sleep 0.1
  done
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

redis_start() {
  command -v redis-server >/dev/null || die "redis-server is not installed (Debian: redis-server)"
  redis-server "$here/redis.conf" --port "$REDIS_PORT" --bind 127.0.0.1 --maxmemory "$MAXMEM" \
    --dir "$DIR" --daemonize yes --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log"
  wait_for_text "$DIR/redis.log" 10 "Ready to accept connections" || die "Redis did not start: $DIR/redis.log"
}

redis_stop() {
  if alive "$DIR/redis.pid"; then kill -9 "$(cat "$DIR/redis.pid")" 2>/dev/null || true; fi
  rm -f "$DIR/redis.pid"
  if [ -d "$DIR" ]; then : > "$DIR/redis.log"; fi
}

start() {
  [ -x "$BIN" ] || die "no wick binary at $BIN (build first, or set WICK_BIN)"
  [ -x "$NGINX" ] || die "nginx is not installed (Debian: nginx)"
  mkdir -p "$DIR"
  : > "$DIR/redis.log"
  redis_start
  servers=""
  i=1
  while [ "$i" -le "$N" ]; do
    port=$((NGINX_PORT + i))
    # shellcheck disable=SC2086
    "$BIN" serve --port "$port" --redis "redis://127.0.0.1:$REDIS_PORT" --replica-name "r$i" \
      $ARGS >"$DIR/r$i.log" 2>&1 &
    echo $! > "$DIR/r$i.pid"
    servers="${servers}server 127.0.0.1:$port max_fails=3 fail_timeout=5s; "
    i=$((i + 1))
  done
  i=1
  while [ "$i" -le "$N" ]; do
    wait_for_text "$DIR/r$i.log" 120 "listening on" "$DIR/r$i.pid" || { stop; die "replica r$i did not start: $DIR/r$i.log"; }
    i=$((i + 1))
  done
  sed -e "s|@PREFIX@|$DIR|g" -e "s|@LISTEN@|127.0.0.1:$NGINX_PORT|g" -e "s|@SERVERS@|$servers|g" \
    "$here/nginx.conf.in" > "$DIR/nginx.conf"
  user_line=""
  [ "$(id -u)" -eq 0 ] && user_line="user root;"  # workers must write $DIR's temp folders
  [ -n "$user_line" ] && sed -i "1i $user_line" "$DIR/nginx.conf"
  "$NGINX" -e "$DIR/nginx-error.log" -p "$DIR" -c "$DIR/nginx.conf" || { stop; die "nginx did not start: $DIR/nginx-error.log"; }
  i=0
  while ! alive "$DIR/nginx.pid"; do
    i=$((i + 1)); [ "$i" -le 50 ] || { stop; die "nginx did not start: $DIR/nginx-error.log"; }
    sleep 0.1
  done
  echo "local-cluster: nginx http://127.0.0.1:$NGINX_PORT -> $N replicas (ports $((NGINX_PORT + 1))..$((NGINX_PORT + N))), Redis 127.0.0.1:$REDIS_PORT; files in $DIR"
}

stop() {
  [ -d "$DIR" ] || return 0
  if alive "$DIR/nginx.pid"; then
    kill "$(cat "$DIR/nginx.pid")" 2>/dev/null || true
    i=0
    while alive "$DIR/nginx.pid" && [ "$i" -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
  fi
  for p in "$DIR"/r*.pid; do
    [ -f "$p" ] || continue
    if alive "$p"; then kill -TERM "$(cat "$p")" 2>/dev/null || true; fi
  done
  for p in "$DIR"/r*.pid; do
    [ -f "$p" ] || continue
    i=0
    while alive "$p" && [ "$i" -lt 150 ]; do sleep 0.1; i=$((i + 1)); done
    if alive "$p"; then kill -9 "$(cat "$p")" 2>/dev/null || true; fi
    rm -f "$p"
  done
  redis_stop
  rm -f "$DIR/nginx.pid"
}

status() {
  for p in "$DIR"/*.pid; do
    [ -f "$p" ] || continue
    if alive "$p"; then echo "$(basename "$p" .pid): running (pid $(cat "$p"))"; else echo "$(basename "$p" .pid): stopped"; fi
  done
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  redis-stop) redis_stop ;;
  redis-start) redis_start ;;
  *) echo "usage: $0 start|stop|status|redis-stop|redis-start" >&2; exit 2 ;;
esac
