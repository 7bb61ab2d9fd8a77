#!/usr/bin/env bash
# The plugin author's 10-minute path (plugin-sdk/README.md#from-an-empty-folder-to-a-running-plugin):
# runs the shell blocks of the SDK README marked <!-- quickstart:NAME --> and nothing else, as a
# new author would:
#   install   from the source checkout, into $HOME/.local (HOME is a scratch folder: no root)
#   new-cpp / new-c, then build (configure, build, unit test, plugin check) from the INSTALLED
#   README, then run (`sqlstreams run` in the background, until host-ready) and produce; the
#   host must log "handled message 1" and stop cleanly on SIGTERM.
# Around the blocks the script only provides what the README tells the reader to have: the
# `sqlstreams` binary on PATH and SQLSTREAMS_DATABASE_URL (a fresh database per language).
# Usage: plugin_quickstart_test.sh SOURCE_DIR SQLSTREAMS_BINARY   (ctest label e2e; exit 77 =
# skipped when SQLSTREAMS_TEST_DATABASE_URL is unset or psql is missing)
set -euo pipefail
src=$1
binary=$2
[[ -n "${SQLSTREAMS_TEST_DATABASE_URL:-}" ]] || { echo "SKIP: SQLSTREAMS_TEST_DATABASE_URL unset"; exit 77; }
command -v psql >/dev/null || { echo "SKIP: psql not installed"; exit 77; }

work=$(mktemp -d /tmp/sqlstreams-quickstart.XXXXXX)
databases=()
host_pid=""
cleanup() {
  local rc=$?
  [[ -n "$host_pid" ]] && kill -9 "$host_pid" 2>/dev/null || true
  for db in "${databases[@]}"; do
    psql "$SQLSTREAMS_TEST_DATABASE_URL" -qAt -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" \
      >/dev/null 2>&1 || true
  done
  if [[ $rc -eq 0 && "${SQLSTREAMS_E2E_KEEP:-}" != 1 ]]; then rm -rf "$work"; else echo "kept $work"; fi
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# The text of the ```sh block after <!-- quickstart:$2 --> in README $1.
block() {
  awk -v tag="<!-- quickstart:$2 -->" '
    $0 == tag { found = 1; next }
    found && /^```sh$/ { inside = 1; next }
    inside && /^```$/ { exit }
    inside { print }' "$1"
}
run_block() {  # README, tag, folder
  local text
  text=$(block "$1" "$2")
  [[ -n "$text" ]] || fail "no quickstart:$2 block in $1"
  echo "---- quickstart:$2 (in $3)"
  echo "$text"
  (cd "$3" && umask "${block_umask:-022}" && bash -euo pipefail -c "$text") ||
    fail "quickstart:$2 failed"
}

# The nested builds (SDK, scaffolded plugins) go through the suite's compiler cache when there
# is one, as the project's own presets do: the commands are the README's, only their compiles are
# cached. The cache stays the caller's (not the scratch HOME below); paths are made relative to
# the scratch folder, so a later run in another scratch folder finds them.
if command -v ccache >/dev/null; then
  export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ccache}"
  export CCACHE_BASEDIR="$work" CCACHE_NOHASHDIR=true
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
fi

# What the reader has: a home and a folder of their own (umask 022 for those: the host refuses
# plugins below group-writable folders), `sqlstreams` on PATH.
umask 022
export HOME="$work/home"
mkdir -p "$HOME" "$work/bin"
chmod 0755 "$work" "$HOME"
ln -s "$binary" "$work/bin/sqlstreams"
export PATH="$work/bin:$PATH"

# 1. The SDK, installed without root (the install block runs in the source checkout; its
#    build folder goes to the scratch folder so the checkout stays clean).
install_text=$(block "$src/plugin-sdk/README.md" install)
[[ -n "$install_text" ]] || fail "no quickstart:install block"
echo "---- quickstart:install"
echo "$install_text"
(cd "$src" && bash -euo pipefail -c "${install_text//build-sdk/$work/build-sdk}") ||
  fail "quickstart:install failed"
readme="$HOME/.local/share/doc/sqlstreams-plugin-sdk/README.md"
[[ -f "$readme" ]] || fail "the installed SDK has no README at $readme"
for f in CHANGES.md ABI_SHA256 examples/c_orders/orders.c; do
  [[ -f "$HOME/.local/share/doc/sqlstreams-plugin-sdk/$f" ]] || fail "installed SDK lacks $f"
done

for lang in cpp c; do
  echo "======== $lang"
  dir="$work/$lang"
  mkdir -p "$dir"
  db="quickstart_${lang}_$$"
  databases+=("$db")
  psql "$SQLSTREAMS_TEST_DATABASE_URL" -qAt -c "CREATE DATABASE \"$db\"" >/dev/null
  base=${SQLSTREAMS_TEST_DATABASE_URL%%\?*}
  export SQLSTREAMS_DATABASE_URL="${base%/*}/$db"

  # `plugin new` and the build under umask 0002, the default for users on Ubuntu and Fedora
  # (plugin-sdk/README.md#plugin-new-plugin-check-and-the-host-in-detail): the scaffold's
  # folders and every link of the .so must still come out as the host accepts them.
  block_umask=0002 run_block "$readme" "new-$lang" "$dir"
  project="$dir/greeter"
  block_umask=0002 run_block "$readme" build "$project"
  touch "$project"/greeter.c*  # a relink (a new .so file, made under that umask) too
  block_umask=0002 run_block "$readme" build "$project"

  run_text=$(block "$readme" run)
  echo "---- quickstart:run (in $project, background)"
  echo "$run_text"
  (cd "$project" && exec bash -c "exec $run_text") >"$work/$lang-host.log" 2>&1 &
  host_pid=$!
  for _ in $(seq 1800); do
    grep -q "host-ready" "$work/$lang-host.log" && break
    kill -0 "$host_pid" 2>/dev/null || { cat "$work/$lang-host.log"; fail "the host ended"; }
    sleep 0.1
  done
  grep -q "host-ready" "$work/$lang-host.log" || { tail -30 "$work/$lang-host.log"; fail "no host-ready"; }

  run_block "$readme" produce "$project"
  for _ in $(seq 600); do
    grep -q "handled message 1" "$work/$lang-host.log" && break
    sleep 0.1
  done
  grep -q "handled message 1" "$work/$lang-host.log" ||
    { tail -30 "$work/$lang-host.log"; fail "$lang: the message was not handled"; }
  kill -TERM "$host_pid"
  rc=0
  wait "$host_pid" || rc=$?
  host_pid=""
  [[ $rc -eq 0 ]] || { tail -30 "$work/$lang-host.log"; fail "$lang: host exited $rc on SIGTERM"; }
  echo "$lang: handled message 1, host stopped cleanly"
done
echo "PASS: C++ and C plugins from 'plugin new' to handled messages, by the README"
