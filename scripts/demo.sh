#!/usr/bin/env bash
# Quick start: installs what is missing, builds, starts a local PostgreSQL, runs the host with
# the payments plugin (config/demo.toml), produces the example payment requests and shows them
# flowing: what each group handled, what is stored, what failed. Then drains the host.
#   scripts/demo.sh            run once and stop
#   scripts/demo.sh --follow   keep the host running (Ctrl-C drains it)
set -euo pipefail
cd "$(dirname "$0")/.."
follow=0
[[ "${1:-}" == "--follow" ]] && follow=1

scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)" --target sqlstreams payments noop >/dev/null
BIN=build/release/bin/sqlstreams

PGDIR=${SQLSTREAMS_PG_DIR:-/tmp/sqlstreams-demo-pg}
PORT=${SQLSTREAMS_PG_PORT:-55432}
url=$(scripts/pg.sh start "$PGDIR" "$PORT")
export SQLSTREAMS_DATABASE_URL="$url"
echo "== PostgreSQL at $SQLSTREAMS_DATABASE_URL (data in $PGDIR; stop: scripts/pg.sh stop $PGDIR)"
psql() { command psql "$SQLSTREAMS_DATABASE_URL" -X -q -P pager=off "$@"; }

# Start from an empty schema so the demo is repeatable.
psql -c "DROP SCHEMA IF EXISTS sqlstreams CASCADE" 2>/dev/null || true

log=$(mktemp /tmp/sqlstreams-demo-host.XXXXXX.log)
echo "== starting: $BIN run --config config/demo.toml   (log: $log)"
"$BIN" run --config config/demo.toml >"$log" 2>&1 &
host=$!
trap 'kill -TERM $host 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do
  grep -q "host-ready" "$log" && break
  kill -0 $host 2>/dev/null || { cat "$log"; echo "host failed to start" >&2; exit 1; }
  sleep 0.1
done

echo "== producing payment requests (one per line of NDJSON, sent as one batch)"
"$BIN" produce payments.requested <<'NDJSON'
{"order_id": "order-101", "amount_cents": 1250, "currency": "EUR"}
{"order_id": "order-102", "amount_cents": 990, "currency": "EUR"}
{"order_id": "order-103", "amount_cents": 4500, "currency": "USD"}
{"order_id": "order-104", "amount_cents": 2000, "currency": "EUR", "cancelled": true}
{"order_id": "order-105", "amount_cents": 300, "currency": "GBP"}
NDJSON
echo "== and one from SQL, inside the producer's own transaction"
psql -c "BEGIN; SELECT sqlstreams.produce('payments.requested', '{\"order_id\": \"order-106\", \"amount_cents\": 700, \"currency\": \"EUR\"}') AS id; COMMIT;"

for _ in $(seq 1 100); do
  done_groups=$(psql -Atc "SELECT count(*) FROM sqlstreams.cursors_1 c WHERE c.claimed >= (SELECT max(id) FROM sqlstreams.messages_1) AND NOT EXISTS (SELECT 1 FROM sqlstreams.leases_1 l WHERE l.group_id = c.group_id)")
  [[ "$done_groups" == "2" ]] && break
  sleep 0.1
done
# The cursor advancer moves `committed` about once a second.
for _ in $(seq 1 30); do
  [[ $(psql -Atc "SELECT count(*) FROM sqlstreams.cursors_1 c JOIN sqlstreams.groups g ON g.id = c.group_id WHERE (g.name = 'audit-payments' AND c.committed = 6) OR (g.name = 'charge-cards' AND c.committed >= 2)") == 2 ]] && break
  sleep 0.1
done

echo; echo "== the log (stored messages)"
psql -c "SELECT id, created_at::time(0) AS created, payload FROM sqlstreams.messages_1 ORDER BY id"
echo "== group cursors (claimed = handed out, committed = resolved)"
psql -c "SELECT g.name AS group, c.claimed, c.committed FROM sqlstreams.cursors_1 c JOIN sqlstreams.groups g ON g.id = c.group_id ORDER BY g.name"
echo "== exceptions: only what did not succeed is written (successes write nothing)"
psql -c "SELECT g.name AS group, e.message_id, e.status, e.attempts, e.can_run_after::time(0) AS next_try, e.last_error FROM sqlstreams.exceptions_1 e JOIN sqlstreams.groups g ON g.id = e.group_id ORDER BY 1, 2"
echo "== order-103 is retried with backoff (2s, 1s, 2s), then dead for charge-cards only"
for _ in $(seq 1 200); do
  [[ $(psql -Atc "SELECT count(*) FROM sqlstreams.exceptions_1 WHERE message_id = 3 AND status = 'dead'") == 1 ]] && break
  sleep 0.1
done
"$BIN" dead list payments.requested charge-cards
"$BIN" dead show payments.requested charge-cards 3
echo "== host log"
sed -e 's/^/   /' "$log"

if [[ $follow -eq 1 ]]; then
  echo "== the host keeps running; produce more with: $BIN produce payments.requested '{...}'"
  trap - EXIT
  wait $host
else
  kill -TERM $host
  wait $host && echo "== host drained and exited 0" || echo "== host exited with $?"
  trap - EXIT
fi
