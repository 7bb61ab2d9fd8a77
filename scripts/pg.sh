#!/usr/bin/env bash
# Throwaway PostgreSQL for tests, the demo and the benchmark.
#   scripts/pg.sh start [DIR] [PORT]   initdb (first time) + start; prints the database URL
#   scripts/pg.sh stop  [DIR]          fast stop
#   scripts/pg.sh restart-immediate [DIR]   crash-stop (-m immediate) then start again
#   scripts/pg.sh url   [DIR] [PORT]   prints the URL
# Runs the server as the `postgres` user when invoked as root (PostgreSQL refuses root),
# as the invoking user otherwise. Unix socket in DIR/sock, TCP on 127.0.0.1:PORT, UTF-8.
set -euo pipefail

cmd=${1:-start}
DIR=${2:-${SQLSTREAMS_PG_DIR:-/tmp/sqlstreams-pg}}
PORT=${3:-${SQLSTREAMS_PG_PORT:-55432}}
DB=${SQLSTREAMS_PG_DB:-sqlstreams}
FSYNC=${SQLSTREAMS_PG_FSYNC:-on}
AUTOVACUUM=${SQLSTREAMS_PG_AUTOVACUUM:-on}
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -x "$PGBIN/initdb" ]] || { echo "pg.sh: PostgreSQL server binaries not found; run scripts/install-deps.sh" >&2; exit 1; }

as_pg() {
  if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}
url() { echo "postgresql://postgres@127.0.0.1:${PORT}/${DB}"; }
# The server runs at the caller's CPU priority (`nice -n 5 scripts/pg.sh start`: scripts/test.sh
# runs the suite's cluster below the chaos runs' clusters). pg_ctl starts the postmaster in a
# session of its own (setsid), and where the kernel schedules by autogroup (sched(7),
# /proc/sys/kernel/sched_autogroup_enabled) each session is a group of its own at nice 0, whatever
# its processes' nice: so the group's nice is set as well.
keep_caller_priority() {
  local n pm
  n=$(nice)
  [[ "$n" != 0 && -f /proc/self/autogroup && -f "$DIR/data/postmaster.pid" ]] || return 0
  pm=$(head -1 "$DIR/data/postmaster.pid")
  echo "$n" >"/proc/$pm/autogroup" 2>/dev/null || true
}

case "$cmd" in
  start)
    if [[ ! -f "$DIR/data/PG_VERSION" ]]; then
      rm -rf "$DIR"; mkdir -p "$DIR/data" "$DIR/sock"
      [[ $(id -u) -eq 0 ]] && chown -R postgres:postgres "$DIR"
      chmod 755 "$DIR"
      as_pg "$PGBIN/initdb" -D "$DIR/data" -U postgres --auth=trust --encoding=UTF8 \
        --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 || { cat "$DIR/initdb.log" >&2; exit 1; }
      cat >>"$DIR/data/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = ${PORT}
unix_socket_directories = '${DIR}/sock'
max_connections = 300
shared_buffers = 256MB
max_wal_size = 4GB
fsync = ${FSYNC}
autovacuum = ${AUTOVACUUM}
max_prepared_transactions = 10
CONF
    fi
    if ! as_pg "$PGBIN/pg_ctl" -D "$DIR/data" status >/dev/null 2>&1; then
      as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 start >/dev/null ||
        { tail -20 "$DIR/server.log" >&2; exit 1; }
      keep_caller_priority
    fi
    if ! as_pg "$PGBIN/psql" -h "$DIR/sock" -p "$PORT" -U postgres -Atqc \
        "SELECT 1 FROM pg_database WHERE datname = '${DB}'" postgres | grep -q 1; then
      as_pg "$PGBIN/psql" -h "$DIR/sock" -p "$PORT" -U postgres -qc "CREATE DATABASE \"${DB}\"" postgres
    fi
    url ;;
  stop)
    if [[ -f "$DIR/data/PG_VERSION" ]]; then
      as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m fast -w stop >/dev/null 2>&1 || true
    fi ;;
  restart-immediate)
    as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -m immediate -w stop >/dev/null
    as_pg "$PGBIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w -t 60 start >/dev/null
    keep_caller_priority ;;
  url) url ;;
  *) echo "usage: $0 start|stop|restart-immediate|url [DIR] [PORT]" >&2; exit 2 ;;
esac
