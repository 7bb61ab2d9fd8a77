#!/usr/bin/env bash
# The long chaos run for development (tests/chaos/README.md): a randomized workload against
# real hosts and a PostgreSQL of its own, faults on a seeded schedule, then the history
# checker. Prints the seed, the fault log and a one-line verdict; exit 0 when no invariant was
# violated. A failing seed replays the same schedule:  scripts/chaos.sh --minutes 5 --seed 42
#   scripts/chaos.sh [--minutes N] [--seed S] [--hosts H] [--faults kill,stop,...] [--plant NAME]
# Builds the asan test preset (the one with the planted defects) first.
set -euo pipefail
cd "$(dirname "$0")/.."

args=("$@")
have_seed=0
for a in "${args[@]}"; do [[ "$a" == "--seed" || "$a" == --seed=* ]] && have_seed=1; done
if [[ $have_seed -eq 0 ]]; then
  seed=$(( (RANDOM << 15) | RANDOM ))
  args+=(--seed "$seed")
fi

scripts/install-deps.sh
cmake --preset asan >/dev/null
cmake --build --preset asan -j"$(nproc)" --target chaos_run chaos sqlstreams
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
exec "$(find build/asan -name chaos_run -type f -perm -u+x | head -1)" "${args[@]}"
