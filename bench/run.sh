#!/usr/bin/env bash
# bench/run.sh [--quick] [sqlstreams_bench flags…] — the whole benchmark in one command:
# builds the release preset (build/release), starts a throwaway PostgreSQL with fsync on in its
# own directory and port (stopped and removed on exit), and runs sqlstreams_bench, which
# measures the runtime and the raw PostgreSQL references in the same run (see bench/README.md).
# Before the driver, bench/peers/run.sh measures graphile-worker and pg-boss (pinned, installed
# with npm into a temporary folder) on the same server; the driver adds their rows (phase 9).
# `--no-peers` skips them; so does a `--phases` list without "peers".
# The result table is printed and written to build/release/bench-results.md (`--out FILE`: there
# instead).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

echo "== building the release preset" >&2
if ! cmake --preset release >/tmp/sqlstreams-bench-configure.log 2>&1; then
  # The bench needs only the runtime libraries: do not let a broken test tree stop it.
  echo "   configure failed (see /tmp/sqlstreams-bench-configure.log); retrying without tests" >&2
  cmake --preset release -DSQLSTREAMS_BUILD_TESTS=OFF >/dev/null
fi
cmake --build --preset release -j2 --target sqlstreams_bench sqlstreams noop async_io http >/dev/null

PORT=${SQLSTREAMS_BENCH_PG_PORT:-55490}
while (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; do PORT=$((PORT + 1)); done
PGDIR=$(mktemp -d /tmp/sqlstreams-bench-pg.XXXXXX)
cleanup() {
  SQLSTREAMS_PG_FSYNC=on scripts/pg.sh stop "$PGDIR" || true
  rm -rf "$PGDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== starting PostgreSQL (fsync on) in $PGDIR on port $PORT" >&2
URL=$(SQLSTREAMS_PG_FSYNC=on SQLSTREAMS_PG_DB=sqlstreams_bench scripts/pg.sh start "$PGDIR" "$PORT")

# The peers: same server, just before; their shapes follow the driver's flags.
ARGS=() PEER_ARGS=(--backlog 100000 --enqueue-seconds 5 --latency-seconds 10) PEERS=1
OUT=build/release/bench-results.md
while (($#)); do
  case $1 in
    --out) OUT=$2; shift ;;
    --out=*) OUT=${1#--out=} ;;
    --no-peers) PEERS=0 ;;
    --quick) PEER_ARGS=(--backlog 20000 --enqueue-seconds 1 --latency-seconds 2) ARGS+=("$1") ;;
    --phases) [[ ,$2, == *,peers,* ]] || PEERS=0; ARGS+=("$1" "$2"); shift ;;
    --phases=*) [[ ,${1#--phases=}, == *,peers,* ]] || PEERS=0; ARGS+=("$1") ;;
    --latency-rate) PEER_ARGS+=(--latency-rate "$2"); ARGS+=("$1" "$2"); shift ;;
    --pickup-load-rate) PEER_ARGS+=(--load-rate "$2"); ARGS+=("$1" "$2"); shift ;;
    *) ARGS+=("$1") ;;
  esac
  shift
done
if ((PEERS)); then
  PEERS_JSON="$PGDIR/peers.json"
  bench/peers/run.sh "$URL" "$PEERS_JSON" "${PEER_ARGS[@]}" ||
    echo "   the peers were not measured; their rows say why" >&2
  ARGS+=(--peers "$PEERS_JSON")
fi

echo "== running sqlstreams_bench ${ARGS[*]}" >&2
build/release/bin/sqlstreams_bench --url "$URL" --out "$OUT" "${ARGS[@]}"
