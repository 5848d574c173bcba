#!/usr/bin/env bash
# Installs the Debian 12 packages fleetcron builds, tests and runs with.
# Idempotent: installs only what is missing, and refreshes the package
# lists only when an install fails without it. Needs root for apt-get.
set -euo pipefail

packages=(
  cmake make g++ clang libclang-rt-14-dev pkg-config   # toolchain; clang for libFuzzer and sanitizers
  dpkg-dev adduser                                      # the Debian packages: dpkg-shlibdeps; the package's postinst
  tzdata libhowardhinnant-date-dev                      # time zones (date, USE_OS_TZDB=1)
  libfmt-dev libcli11-dev                               # formatting, command line
  libhiredis-dev redis-server redis-tools               # fleetcron::redis and its integration tests
  libssl-dev openssl                                    # Redis over TLS; the tests' certificates
  libnats-dev nats-server valgrind                      # fleetcron::nats, its integration tests, the leak check
  libpq-dev postgresql postgresql-client                # fleetcron::postgres; initdb, pg_ctl, psql, pgbench for its tests
  faketime curl iproute2 nftables jq                    # e2e: a skewed clock, status --json, partitions; CLI: /metrics, ss
  libtomlplusplus-dev libcpp-httplib-dev                # the daemon: TOML config, HTTP (with OpenSSL: https:// webhooks)
  libgtest-dev libgmock-dev libbenchmark-dev            # tests, benchmarks
  chromium chromium-driver python3                      # the status page's test in a real browser (WebDriver)
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) != 0 ]]; then
  echo "deps.sh: missing packages: ${missing[*]}; run as root (apt-get install needs it)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt_options=(-y -q -o DPkg::Lock::Timeout=300)
echo "deps.sh: installing ${missing[*]}"
if ! apt-get install "${apt_options[@]}" "${missing[@]}"; then
  apt-get update -q -o DPkg::Lock::Timeout=300
  apt-get install "${apt_options[@]}" "${missing[@]}"
fi
