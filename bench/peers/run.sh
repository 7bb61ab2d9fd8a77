#!/usr/bin/env bash
# bench/peers/run.sh URL OUT_JSON [peers.mjs flags…] — installs the pinned peers
# (bench/peers/package.json + package-lock.json: graphile-worker, pg-boss) with `npm ci` into a
# temporary folder (removed on exit; nothing is installed globally or in the tree) and runs
# peers.mjs against the database URL, writing its JSON to OUT_JSON. Installs nodejs + npm from
# Debian when they are missing. Exit status: 0 when at least one peer was measured; otherwise
# non-zero with the reason on stderr and {"peers":[],"errors":[reason]} in OUT_JSON, so
# bench/run.sh can still print the SQLStreams rows and say why the peer rows are missing.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
URL=${1:?usage: bench/peers/run.sh URL OUT_JSON [flags]}
OUT=${2:?usage: bench/peers/run.sh URL OUT_JSON [flags]}
shift 2

fail() {
  echo "bench/peers: $1" >&2
  printf '{"peers":[],"errors":["%s"]}\n' "${1//\"/\'}" >"$OUT"
  exit 1
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "== bench/peers: installing nodejs and npm (Debian packages)" >&2
  if [[ $(id -u) -eq 0 ]]; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; } \
      >/tmp/sqlstreams-bench-peers-apt.log 2>&1 ||
      fail "could not install nodejs and npm (see /tmp/sqlstreams-bench-peers-apt.log)"
  else
    fail "node and npm are not installed (run as root, or apt-get install nodejs npm)"
  fi
fi
NODE_MAJOR=$(node -p 'process.versions.node.split(".")[0]')
((NODE_MAJOR >= 18)) || fail "node $(node --version) is too old: the peers need node >= 18"

WORK=$(mktemp -d /tmp/sqlstreams-bench-peers.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cp "$HERE/package.json" "$HERE/package-lock.json" "$HERE/peers.mjs" "$WORK/"
echo "== bench/peers: npm ci (graphile-worker, pg-boss; pinned) in $WORK" >&2
(cd "$WORK" && npm ci --no-audit --no-fund --loglevel=error >"$WORK/npm.log" 2>&1) ||
  fail "npm ci failed (no registry access?): $(tail -n 3 "$WORK/npm.log" | tr '\n"' ' ')"

echo "== bench/peers: measuring" >&2
node "$WORK/peers.mjs" --url "$URL" "$@" >"$OUT"
