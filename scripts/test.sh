#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs packages, checks the formatting
# (scripts/format.sh --check) and the thread-safety annotations (scripts/thread_safety.sh),
# builds the tests with
# AddressSanitizer + UndefinedBehaviorSanitizer (preset "asan"), starts a throwaway
# PostgreSQL for the run, runs every test (unit, integration, e2e), stops PostgreSQL.
# Then the TSan job: builds the "tsan" preset's test targets of the folders where threads meet
# (tests/common, consume, maintain, isolation, plugins/http; at nice 5 while the asan tests run;
# their e2e executables are not built) and runs
# their unit and integration tests under ThreadSanitizer; a TSan report fails its test and so
# the run. The asan result is kept while it runs: the run fails when either failed.
# SQLSTREAMS_SKIP_TSAN=1 skips the TSan job (local runs only; .ci/run unsets it), and so do
# ctest arguments (a subset run).
# Extra arguments go to ctest (e.g. scripts/test.sh -L unit, scripts/test.sh -R fence).
# scripts/test.sh --tsan [ctest args]: every unit and integration test under ThreadSanitizer
# instead (preset "tsan", suppressions with their reasons in tests/tsan.supp).
set -euo pipefail
cd "$(dirname "$0")/.."

# Hermetic: no test may depend on the caller's environment. Every SQLSTREAMS_* (but the
# SQLSTREAMS_SKIP_TSAN switch read below) and PG* variable is cleared and the locale fixed;
# the suite sets what it needs (SQLSTREAMS_TEST_*). Hermetic.TheCallersEnvironmentIsCleared
# (tests/docs) checks it.
skip_tsan=${SQLSTREAMS_SKIP_TSAN:-0}
for name in $(compgen -e); do  # exported names only (a value with a newline cannot fool it)
  if [[ "$name" == SQLSTREAMS_* || "$name" == PG* || "$name" == LC_* || "$name" == LANG* ]]; then
    unset "$name"
  fi
done
export LC_ALL=C.UTF-8

# Background work at a low CPU priority, in a session of its own (so that `kill -- -PID` stops all
# of it). Where the kernel schedules by autogroup (sched(7)), a session is a scheduling group of
# its own at nice 0 and `nice` only orders processes inside one group: the group's nice is set too,
# or a "nice 19" build would take the same share of the cores as the tests.
low_priority() {  # low_priority N command [args...]
  setsid bash -c 'echo "$0" >/proc/self/autogroup 2>/dev/null || true; exec nice -n "$0" "$@"' "$@"
}

# One line per phase with its duration (CONTRIBUTING.md#build-speed).
phase_start=$SECONDS
run_start=$SECONDS
phase() { echo "== phase $1: $((SECONDS - phase_start)) s (total $((SECONDS - run_start)) s)"; phase_start=$SECONDS; }

preset=asan
if [[ "${1:-}" == "--tsan" ]]; then
  preset=tsan
  shift
fi

scripts/install-deps.sh
phase deps
scripts/format.sh --check
cmake --preset "$preset" >/dev/null
# The lock-annotation check only parses (~40 CPU-s): it runs beside the build at a lower CPU
# priority and its verdict is collected after the tests (a violation fails the run).
ts_log="build/$preset/thread-safety.log"
low_priority 10 scripts/thread_safety.sh "build/$preset" >"$ts_log" 2>&1 &
ts_pid=$!
phase checks
cmake --build --preset "$preset" -j"$(nproc)"
phase "build ($preset)"

# The TSan job's build overlaps the asan tests, at nice 5 in a session of its own (about a quarter
# of the cores when everything is busy; CONTRIBUTING.md#the-tsan-job): at nice 19 a cold build was
# still compiling 134 s after the asan tests ended, and the machine half idle. Its output goes to
# build/tsan-job-build.log, printed if it fails.
tsan_dirs=(common consume maintain isolation plugins/http)
tsan_job=0
if [[ "$preset" != tsan && $# -eq 0 && "$skip_tsan" != 1 ]]; then
  tsan_job=1
  # Every unit and integration test executable of those folders (a test target left unbuilt
  # would fail as NOT_BUILT; an e2e one's placeholder has no label, and -L below passes it over).
  tsan_targets=()
  for dir in "${tsan_dirs[@]}"; do
    tsan_targets+=($(sed -n 's/^add_executable(\([A-Za-z0-9_]*\).*/\1/p' "tests/$dir/CMakeLists.txt" |
      grep -v '_e2e_'))
  done
  cmake --preset tsan >/dev/null
  tsan_log=build/tsan-job-build.log
  low_priority 5 cmake --build --preset tsan -j"$(nproc)" --target "${tsan_targets[@]}" \
    >"$tsan_log" 2>&1 &
  tsan_build_pid=$!
fi

# Two lanes when the whole suite runs (CONTRIBUTING.md#scheduling): the chaos runs (label chaos;
# each starts its own cluster and three hosts, and a planted defect must be caught within a fixed
# run) one after another at normal CPU priority, and every other test beside them at nice 5,
# the suite's cluster too. Since the plant runs stopped draining, the
# chaos lane is busy throughout: at nice 10 the other lane got so little that it took 363 s
# against 250 s at nice 5, whose plant margins stayed wide (CONTRIBUTING.md#scheduling).
lanes=0
if [[ "$preset" == asan && $# -eq 0 ]]; then lanes=1; fi
below_chaos=()
lane_nice=5
if [[ "$lanes" == 1 ]]; then below_chaos=(nice -n "$lane_nice"); fi

# A free TCP port for this run's cluster, below the kernel's range of ephemeral ports
# (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 here): in that range a port nobody listens
# on can still be the local end of an outgoing connection, and the server's bind then fails
# (seen on 2026-12-06: 55500 was the local port of a connection to another cluster).
port=25500
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do port=$((port + 1)); done
pgdir=$(mktemp -d /tmp/sqlstreams-test-pg.XXXXXX)
cleanup() {
  # An early exit (a failed start, ^C) also stops the overlapped TSan build (its own group)
  # and the chaos lane.
  # (|| true: under set -e a failed kill of a finished build would become the exit status.)
  if [[ -n "${tsan_build_pid:-}" ]]; then kill -- "-$tsan_build_pid" 2>/dev/null || true; fi
  if [[ -n "${chaos_pid:-}" ]]; then kill "$chaos_pid" 2>/dev/null || true; fi
  kill -- "-$ts_pid" 2>/dev/null || true
  scripts/pg.sh stop "$pgdir" >/dev/null 2>&1 || true
  rm -rf "$pgdir"
}
trap cleanup EXIT
# fsync off: acceptable for functional tests only, never for the benchmark. Autovacuum off: the
# suite leaves its ~400 databases on the cluster, and the launcher starts a worker in each of them
# once a minute, each a backend's fork (~40 ms of CPU on the 2-core machines): with 930 databases
# five e2e tests took 58.6 CPU-s with it and 34.1 without (CONTRIBUTING.md#build-speed). No test
# relies on it; one that needs statistics runs ANALYZE itself.
SQLSTREAMS_PG_FSYNC=off SQLSTREAMS_PG_AUTOVACUUM=off SQLSTREAMS_PG_DB=postgres "${below_chaos[@]}" scripts/pg.sh start "$pgdir" \
  "$port" >/dev/null
export SQLSTREAMS_TEST_DATABASE_URL="postgresql://postgres@127.0.0.1:${port}/postgres"
export SQLSTREAMS_TEST_PG_DIR="$pgdir"
export SQLSTREAMS_TEST_HERMETIC=1  # Hermetic.TheCallersEnvironmentIsCleared
# The cluster is removed as a whole at the end: tests leave their databases (a DROP DATABASE
# costs a checkpoint; tests/support/test_database.hpp).
export SQLSTREAMS_TEST_THROWAWAY_CLUSTER=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
# halt_on_error: a report fails its test; second_deadlock_stack: both stacks of an inversion.
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/tests/tsan.supp}"

# Two tests per core: most of them wait on PostgreSQL, host processes, leases and timeouts
# more than they compute (asan tests 521 s at -j2, 467 s at -j4, same CPU). Tests that need the
# whole cluster are RUN_SERIAL; long tests carry a COST so they start first.
jobs=$(($(nproc) * 2))
status=0
if [[ "$lanes" == 1 ]]; then
  chaos_log="build/$preset/chaos-lane.log"
  ctest --test-dir "build/$preset/tests/chaos" -L chaos -j1 --timeout 600 --output-on-failure \
    >"$chaos_log" 2>&1 &
  chaos_pid=$!
  "${below_chaos[@]}" ctest --preset "$preset" -LE chaos -j"$jobs" --timeout 600 || status=$?
  phase "tests ($preset but chaos, beside the chaos lane)"
else
  ctest --preset "$preset" -j"$jobs" --timeout 600 "$@" || status=$?
  phase "tests ($preset)"
fi
# At the very end of a failed run, each failed test's failure lines again, so that the tail of a
# long CI log says why: each gtest "Failure" (or sanitizer / timeout line) with the 3 lines after it
# (where, actual, expected) and the last 14 lines of what the assertion streamed (a host log's
# tail: where a hang or a crash shows). A host's JSON log line is shortened to its time and msg.
failure_digest() {
  [[ "$status" != 0 ]] || return 0
  echo "== failures (from each lane's LastTest.log; the whole output is above)"
  local log
  for log in "build/$preset/Testing/Temporary/LastTest.log" \
    "build/$preset/tests/chaos/Testing/Temporary/LastTest.log" \
    "build/tsan/tsan-job/Testing/Temporary/LastTest.log"; do
    [[ -f "$log" ]] || continue
    awk '
      function compact(s,   at) {
        if (s ~ /^ *\{"ts":"/ && (at = index(s, "\"msg\":\"")) > 0) {
          s = substr(s, index(s, "T") + 1, 12) " " substr(s, at + 7)
          sub(/"\}$/, "", s)
        }
        return "   " substr(s, 1, 240) "\n"
      }
      function flush(   i) {
        if (!open) return
        if (skipped > 0) block = block "   ... (" skipped " lines)\n"
        for (i = ring_n - kept + 1; i <= ring_n; i++) block = block ring[i % 14]
        keep = keep block; open = 0; block = ""; ring_n = 0; kept = 0; skipped = 0
      }
      /^[0-9]+\/[0-9]+ Test: / { name = $3; keep = ""; open = 0; blocks = 0; next }
      /^Test Failed\./ { flush(); if (name != "") printf "-- %s\n%s", name, keep; name = ""; next }
      /^Test Passed\./ { name = ""; next }
      name == "" { next }
      /Failure$|: Failure|ERROR: |Timeout|timed out|runtime error|SUMMARY: / {
        flush()
        if (++blocks > 4) next
        open = 1; head = 1; block = compact($0); next
      }
      /^\[  FAILED  \]|^\[       OK \]/ { flush(); next }
      open && head < 4 { block = block compact($0); head++; next }
      open {
        ring[++ring_n % 14] = compact($0)
        if (kept < 14) kept++; else skipped++
      }' "$log"
  done
}
# The chaos lane's result: its ctest output (each run's verdict is in its LastTest.log).
finish_chaos_lane() {
  [[ -n "${chaos_pid:-}" ]] || return 0
  local rc=0
  wait "$chaos_pid" || rc=$?
  chaos_pid=
  echo "== chaos lane (build/$preset/tests/chaos, label chaos, one run at a time)"
  cat "$chaos_log"
  if [[ "$rc" != 0 ]]; then status=1; fi
  phase "tests (chaos lane, the part left)"
}
check_thread_safety() {
  if wait "$ts_pid"; then
    tail -n 1 "$ts_log"
  else
    cat "$ts_log" >&2
    echo "thread-safety: failed (output above, $ts_log)" >&2
    status=1
  fi
}
check_thread_safety
if [[ "$tsan_job" != 1 ]]; then
  finish_chaos_lane
  failure_digest
  exit "$status"
fi

# The TSan job (CONTRIBUTING.md#the-tsan-job): the build started above, then the unit and
# integration tests of the folders where threads meet (beside the chaos lane, at the lane's nice).
echo "== TSan job: ${tsan_dirs[*]}"
if ! wait "$tsan_build_pid"; then
  cat "$tsan_log"
  echo "TSan job: the build failed (output above, $tsan_log)" >&2
  exit 1
fi
tail -n 1 "$tsan_log"
phase "build (tsan job, the part left after the asan tests)"
# One ctest over the folders (a test file that lists them), so that its -j4 packs their
# tests together: folder by folder at -j2, each folder's longest test left a core idle.
tsan_job_dir=build/tsan/tsan-job
mkdir -p "$tsan_job_dir"
{
  echo "# Written by scripts/test.sh: the TSan job's folders, for one ctest."
  for dir in "${tsan_dirs[@]}"; do echo "subdirs(\"$PWD/build/tsan/tests/$dir\")"; done
} >"$tsan_job_dir/CTestTestfile.cmake"
"${below_chaos[@]}" ctest --test-dir "$tsan_job_dir" -L 'unit|integration' -j"$jobs" \
  --timeout 600 --output-on-failure || status=$?
phase "tests (tsan job)"
finish_chaos_lane
failure_digest
exit "$status"
