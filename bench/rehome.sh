#!/bin/bash
# bench/rehome.sh — the re-home figure of docs/operating/retention.md#retention-and-maintenance (V007).
# Times one re-home: N rows of a 1,000,000-id range waiting in the default partition, moved by
# create_partition() under the log's lock. Prints the hold in ms for N = 10k, 100k, 1M.
set -e
cd "$(dirname "$0")/.."  # the repository; needs the asan build (scripts/test.sh or cmake --build --preset asan)
export SQLSTREAMS_DATABASE_URL=postgresql://postgres@127.0.0.1:55501/postgres
scripts/pg.sh stop /tmp/sqlstreams-rehome-pg >/dev/null 2>&1 || true; rm -rf /tmp/sqlstreams-rehome-pg; SQLSTREAMS_PG_FSYNC=off SQLSTREAMS_PG_DB=postgres scripts/pg.sh start /tmp/sqlstreams-rehome-pg 55501 >/dev/null
build/asan/bin/sqlstreams declare --config bench/rehome.toml >/dev/null
for n in 10000 100000 1000000; do
  k=$(psql -qAt "$SQLSTREAMS_DATABASE_URL" -c "SELECT partitions_upto FROM sqlstreams.streams WHERE name='bench.rehome'")
  psql -qAt "$SQLSTREAMS_DATABASE_URL" -c "INSERT INTO sqlstreams.messages_1 (id, payload) SELECT g, '{\"pad\": \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\", \"tag\": \"batch-1\"}' FROM generate_series($k, $k + $n - 1) g; SELECT setval('sqlstreams.messages_1_id_seq', $k + $n - 1);"; psql -qAt "$SQLSTREAMS_DATABASE_URL" -c "VACUUM ANALYZE sqlstreams.messages_1_default"
  ms=$(psql -qAt "$SQLSTREAMS_DATABASE_URL" -c "\\timing on" -c "BEGIN; LOCK TABLE ONLY sqlstreams.messages_1 IN ACCESS EXCLUSIVE MODE; SELECT sqlstreams.ensure_partitions(1, $k); COMMIT;" | grep -o 'Time: [0-9.]* ms' | awk '{s+=$2} END {print s}')
  echo "rehome rows=$n held_ms=$ms (sum of the statement times under the lock)"
done
psql -qAt "$SQLSTREAMS_DATABASE_URL" -c "SELECT count(*) AS left_in_default FROM sqlstreams.messages_1_default"
scripts/pg.sh stop /tmp/sqlstreams-rehome-pg >/dev/null
