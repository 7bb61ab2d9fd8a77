#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs packages, checks the formatting
# (scripts/format.sh --check) and the thread-safety annotations (scripts/thread_safety.sh),
# builds the tests with
# AddressSanitizer + UndefinedBehaviorSanitizer (preset "asan"), starts a throwaway
# PostgreSQL for the run, runs every test (unit, integration, e2e), stops PostgreSQL.
# Extra arguments go to ctest (e.g. scripts/test.sh -L unit, scripts/test.sh -R fence).
# scripts/test.sh --tsan [ctest args]: the unit and integration tests under ThreadSanitizer
# instead (preset "tsan", suppressions with their reasons in tests/tsan.supp).
set -euo pipefail
cd "$(dirname "$0")/.."

preset=asan
if [[ "${1:-}" == "--tsan" ]]; then
  preset=tsan
  shift
fi

scripts/install-deps.sh
scripts/format.sh --check
cmake --preset "$preset" >/dev/null
scripts/thread_safety.sh "build/$preset"
cmake --build --preset "$preset" -j"$(nproc)"

# A free TCP port for this run's cluster.
port=55500
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
pgdir=$(mktemp -d /tmp/sqlstreams-test-pg.XXXXXX)
cleanup() { scripts/pg.sh stop "$pgdir" >/dev/null 2>&1 || true; rm -rf "$pgdir"; }
trap cleanup EXIT
# fsync off: acceptable for functional tests only, never for the benchmark.
SQLSTREAMS_PG_FSYNC=off SQLSTREAMS_PG_DB=postgres scripts/pg.sh start "$pgdir" "$port" >/dev/null
export SQLSTREAMS_TEST_DATABASE_URL="postgresql://postgres@127.0.0.1:${port}/postgres"
export SQLSTREAMS_TEST_PG_DIR="$pgdir"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# halt_on_error: a report fails its test; second_deadlock_stack: both stacks of an inversion.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp}"

ctest --preset "$preset" -j2 --timeout 600 "$@"
