#!/usr/bin/env bash
# Installs every Debian package SQLStreams needs to build, test, bench and run its demo.
# Idempotent: quiet and fast when everything is already present. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  cmake g++ make pkg-config ca-certificates
  # the build: Ninja, and ccache as the compiler launcher of every preset (CMakePresets.json)
  ninja-build ccache
  # scripts/format.sh --check and scripts/thread_safety.sh (clang -Wthread-safety), both run by
  # scripts/test.sh
  clang-format clang
  # scripts/thread_safety.sh reads compile_commands.json with it
  python3
  libboost-dev libpqxx-dev libpq-dev libtomlplusplus-dev nlohmann-json3-dev
  libspdlog-dev libfmt-dev libgtest-dev libgmock-dev googletest libbenchmark-dev
  libcli11-dev prometheus-cpp-dev libcivetweb-dev libsystemd-dev
  postgresql postgresql-client
  # the C plugin example and `plugin new --lang c` read JSON with json-c (the SDK needs none)
  libjson-c-dev
  # SHA-256 of the private plugin images (libcrypto); the http plugin's Standard Webhooks
  # HMAC (libcrypto) and TLS (libssl); its tests make a certificate (openssl); libcurl is the
  # reference client of its bench row (bench/http_bench.cpp)
  libssl-dev libcurl4-openssl-dev openssl
  # cpack -G DEB (dpkg-shlibdeps, file); the status page test renders in headless Chromium
  dpkg-dev file chromium
  # tests/e2e/clock_skew_test runs hosts with a shifted wall clock (libfaketime)
  faketime
  # tests/service/systemd_service_test boots a private systemd (systemctl, journalctl,
  # systemd-analyze) and installs the .deb with apt, whose Depends (adduser) and Recommends
  # (postgresql-client, above) must already be installed: the test downloads nothing
  systemd adduser apt util-linux
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

SUDO=""
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
