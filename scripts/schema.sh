#!/usr/bin/env bash
# scripts/schema.sh — regenerates migrations/schema.sql: the normalised schema of a freshly
# migrated database with one stream family (tests/store/schema_file_test.cpp, which checks the
# file in every test run). Builds the store tests (preset asan), starts a throwaway PostgreSQL
# (scripts/pg.sh), runs that test with SQLSTREAMS_WRITE_SCHEMA_SQL=1 and stops the cluster.
# Run it after changing a migration and commit the diff with the migration.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset asan >/dev/null
cmake --build --preset asan --target store_tests >/dev/null
port=55700
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
pgdir=$(mktemp -d /tmp/sqlstreams-schema-pg.XXXXXX)
trap 'scripts/pg.sh stop "$pgdir" >/dev/null 2>&1 || true; rm -rf "$pgdir"' EXIT
SQLSTREAMS_PG_FSYNC=off SQLSTREAMS_PG_DB=postgres scripts/pg.sh start "$pgdir" "$port" >/dev/null
SQLSTREAMS_TEST_DATABASE_URL="postgresql://postgres@127.0.0.1:${port}/postgres" \
  SQLSTREAMS_TEST_PG_DIR="$pgdir" SQLSTREAMS_TEST_THROWAWAY_CLUSTER=1 \
  SQLSTREAMS_WRITE_SCHEMA_SQL=1 \
  build/asan/tests/store/store_tests --gtest_filter='SchemaFileTest.*' >"$pgdir/test.log" 2>&1 ||
  { cat "$pgdir/test.log" >&2; exit 1; }
git --no-pager diff --stat -- migrations/schema.sql
echo "migrations/schema.sql regenerated"
