#!/usr/bin/env bash
# Clang's thread-safety analysis over every runtime/ source: the GUARDED_BY / REQUIRES
# annotations of common/mutex.hpp are checked, and a violation fails (-Werror). It reuses the
# flags of a configured build's compile_commands.json (default build/asan; scripts/test.sh runs
# it after configuring) and only parses (-fsyntax-only) the sources that include
# common/mutex.hpp (directly or through runtime/ headers): no objects, well under a minute.
# Usage: scripts/thread_safety.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/asan}
db="$build/compile_commands.json"
[[ -f "$db" ]] || { echo "thread-safety: $db is missing: configure the build first" >&2; exit 1; }
command -v clang++ >/dev/null || { echo "thread-safety: clang++ is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }

# One line per runtime/ translation unit: the compile command as clang++ -fsyntax-only.
mapfile -t commands < <(python3 - "$db" "$PWD/runtime/" <<'PY'
import json, shlex, sys
import os, re
entries, root = json.load(open(sys.argv[1])), sys.argv[2]
include = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
seen = {}
def annotated(path):  # does this file include common/mutex.hpp, directly or through runtime/?
    if path not in seen:
        seen[path] = False
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            return False
        seen[path] = any(inc == "common/mutex.hpp" or annotated(os.path.join(root, inc))
                         for inc in include.findall(text))
    return seen[path]
def sources(e):  # a unity batch (SQLSTREAMS_UNITY_BUILD) stands for the sources it includes
    if "/Unity/unity_" not in e["file"]:
        return [e["file"]]
    return include.findall(open(e["file"], encoding="utf-8").read())
for e, file in ((e, f) for e in entries for f in sources(e)):
    if not file.startswith(root) or not annotated(file):
        continue
    args = shlex.split(e["command"]) if "command" in e else list(e["arguments"])
    out, skip = ["clang++"], False
    for a in args[1:]:
        if skip:
            skip = False
        elif a == "-o":
            skip = True
        elif a != "-c" and a != e["file"] and not a.startswith("-fsanitize"):
            out.append(a)
    out += ["-fsyntax-only", "-Wno-everything", "-Wthread-safety", "-Werror=thread-safety",
            file]
    print(shlex.join(out))
PY
)
[[ ${#commands[@]} -gt 0 ]] || { echo "thread-safety: no runtime/ source in $db includes common/mutex.hpp" >&2; exit 1; }
printf '%s\n' "${commands[@]}" |
  xargs -P "$(nproc)" -I{} bash -c '{}' && status=0 || status=$?
if [[ $status -ne 0 ]]; then
  echo "thread-safety: clang -Wthread-safety found violations (above)" >&2
  exit 1
fi
echo "thread-safety: ${#commands[@]} annotated runtime sources clean"
